//! Starting and stopping the HTTP server.

use std::net::SocketAddr;

use tracing_subscriber::EnvFilter;

use crate::config::Config;
use crate::store::Store;

fn init_logging(json: bool) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}

pub async fn serve(config: Config) -> anyhow::Result<()> {
    init_logging(config.log_json);
    let store = Store::connect(&config.database_url).await?;
    let seeded = config.demo && crate::demo::seed(&store).await?;
    let listen = config.listen;
    let demo = config.demo;
    let state = crate::state(store, config);
    let _driver = crate::start_scheduler(&state);
    let _gateways = crate::gateway::start(state.gateways.clone());
    let _replicas = state.store.follow_replicas();
    if seeded {
        crate::demo::reclaim_later(state.store.clone(), std::time::Duration::from_secs(30));
    }
    let app = super::app(state);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "switchyard listening");
    print_banner(addr, demo);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown())
    .await?;
    tracing::info!("switchyard stopped");
    Ok(())
}

fn print_banner(addr: SocketAddr, demo: bool) {
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    eprintln!(
        "\n  Switchyard is running at http://{host}:{}/",
        addr.port()
    );
    if demo {
        eprintln!(
            "  Sign in with organization `acme`, user `alice` (tenant admin), password `{}`",
            crate::demo::PASSWORD
        );
        eprintln!("  Platform admin: organization `platform`, user `root`, same password.\n");
    }
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
