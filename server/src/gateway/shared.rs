//! What every gateway listener and the reconcile loop share: the current [`Snapshot`]
//! (rebuilt when the store's access generation moves), the upstream instances' state
//! (requests in flight, health, passive ejection), the listeners, the pooled upstream client
//! and the per-endpoint counters.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Body;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::listener::Listener;
use super::listener::TcpListenerHandle;
use super::metrics::TargetState;
use super::metrics::TcpRegistry;
use super::snapshot::Snapshot;
use super::tls::Tls;
use crate::config::GatewayConfig;
use crate::store::Store;

/// An instance that refused a connection is skipped this long.
pub(super) const EJECT_MS: i64 = 5_000;

/// Shared by every listener and the reconcile loop.
pub struct Gateways {
    pub(super) store: Store,
    pub(super) bind: IpAddr,
    pub(super) tls_dir: Option<PathBuf>,
    pub(super) plain_http: bool,
    /// How long a client connection may wait with no request, and how long a begun request
    /// may take to arrive (see [`crate::config::GatewayConfig`]).
    pub(super) idle_timeout: Duration,
    pub(super) request_timeout: Duration,
    pub(super) snap: RwLock<Arc<Snapshot>>,
    pub(super) rebuild: tokio::sync::Mutex<()>,
    pub(super) targets: Mutex<HashMap<String, Arc<TargetState>>>,
    /// For WebSocket handshakes (the connection is handed over after the 101).
    pub(super) client: Client<HttpConnector, Body>,
    /// Every other request's upstream connections, driven by the request's own task.
    pub(super) upstreams: Arc<super::upstream::Upstreams>,
    /// The HTTP/1.1 path's idle upstream connections.
    pub(super) h1_upstreams: super::h1::Pool,
    pub(super) listeners: tokio::sync::Mutex<HashMap<String, Listener>>,
    /// The raw TCP routes' listeners, by port.
    pub(super) tcp_listeners: tokio::sync::Mutex<HashMap<u16, TcpListenerHandle>>,
    /// Each gateway's self-signed certificate (made once per process, shared by its HTTP and
    /// TCP listeners), by gateway id.
    pub(super) self_signed: Mutex<HashMap<String, Arc<Tls>>>,
    /// Why listeners could not start, as last logged (each failure is logged once).
    pub(super) refused: Mutex<super::refused::Refused>,
    /// Per endpoint counters for `/metrics`.
    pub metrics: super::metrics::Registry,
    /// Per TCP route counters for `/metrics`.
    pub tcp: TcpRegistry,
    /// The endpoints' counters sampled over time (the last hour per endpoint).
    pub series: super::series::Series,
}

impl Gateways {
    pub fn new(store: Store, config: &GatewayConfig) -> Arc<Gateways> {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(Duration::from_secs(2)));
        http.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(http);
        Arc::new(Gateways {
            store,
            bind: config.bind,
            tls_dir: config.tls_dir.clone(),
            plain_http: config.plain_http,
            idle_timeout: config.idle_timeout,
            request_timeout: config.request_timeout,
            snap: RwLock::new(Arc::new(Snapshot {
                generation: u64::MAX,
                ..Default::default()
            })),
            rebuild: tokio::sync::Mutex::new(()),
            targets: Mutex::new(HashMap::new()),
            client,
            upstreams: Default::default(),
            h1_upstreams: Default::default(),
            listeners: tokio::sync::Mutex::new(HashMap::new()),
            tcp_listeners: tokio::sync::Mutex::new(HashMap::new()),
            self_signed: Mutex::new(HashMap::new()),
            refused: Default::default(),
            metrics: Default::default(),
            tcp: Default::default(),
            series: Default::default(),
        })
    }

    pub(super) fn cached(&self) -> Arc<Snapshot> {
        match self.snap.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The snapshot as of every commit this process has seen: rebuilt first when one changed
    /// who may call what (one rebuild at a time; others wait for it). An error (the store
    /// unreachable) is returned rather than an older snapshot: a revocation is never missed.
    pub async fn current(&self) -> Result<Arc<Snapshot>, sqlx::Error> {
        let want = self.store.access_generation();
        let s = self.cached();
        if s.generation == want {
            return Ok(s);
        }
        let _one = self.rebuild.lock().await;
        let want = self.store.access_generation();
        let s = self.cached();
        if s.generation == want {
            return Ok(s);
        }
        let next = Arc::new(
            Snapshot::load(&self.store, want, &|id| self.target(id), &|id, name| {
                self.metrics.endpoint(id, name)
            })
            .await?,
        );
        // Deleted endpoints and TCP routes leave `/metrics`.
        self.metrics.retain(|id| next.endpoints.contains_key(id));
        let routes: std::collections::HashSet<&str> =
            next.tcp.values().map(|r| r.id.as_str()).collect();
        self.tcp.retain(|id| routes.contains(id));
        match self.snap.write() {
            Ok(mut w) => *w = next.clone(),
            Err(poisoned) => *poisoned.into_inner() = next.clone(),
        }
        Ok(next)
    }

    /// The tracked state of a target (created on first use).
    pub fn target(&self, id: &str) -> Arc<TargetState> {
        let mut t = match self.targets.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        t.entry(id.to_string()).or_default().clone()
    }
}
