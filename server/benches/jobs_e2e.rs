//! End to end: jobs submitted through the REST API (the real router, API-token auth, full
//! validation, one transaction with an audit entry per job) until the scheduler's driver has
//! admitted them and the simulated executor reports them running. Prints sustained jobs/s on
//! SQLite and on PostgreSQL.
//!
//! `cargo bench -p switchyard --bench jobs_e2e` (PostgreSQL at SWITCHYARD_TEST_POSTGRES or
//! 127.0.0.1:5432; set JOBS_E2E_N to change the job count, default 5000; JOBS_E2E_CLIENTS for
//! concurrent clients, default 16). Two modes per store: one job per `POST /jobs` from 16
//! clients (concurrent single submits are group-committed), and `POST /jobs/batch` with
//! JOBS_E2E_BATCH jobs (default 100) from 4 clients. JOBS_E2E_MODES=single (or batch) runs
//! one mode only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use app::model::{CreateTenant, RequestMeta};
use switchyard::audit::Actor;
use switchyard::config::Config;
use switchyard::identity::{directory, password};
use switchyard::store::Store;

async fn call(
    router: &axum::Router,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut b = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    let req = match body {
        Some(v) => {
            b = b.header(header::CONTENT_TYPE, "application/json");
            b.body(Body::from(v.to_string())).unwrap()
        }
        None => b.body(Body::empty()).unwrap(),
    };
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn run(label: &str, url: &str, n: usize, clients: usize, batch: usize) {
    let store = Store::connect(url).await.unwrap();
    let actor = Actor::system("bench");
    let meta = RequestMeta::default();
    let t = switchyard::tenancy::insert_tenant(
        &store,
        &actor,
        &meta,
        CreateTenant {
            slug: "bench".into(),
            name: "Bench".into(),
        },
    )
    .await
    .unwrap();
    let hash = password::hash("bench-password-123").unwrap();
    directory::insert_user(
        &store,
        &t.id,
        &actor,
        &meta,
        "admin",
        "Admin",
        None,
        Some(hash),
        true,
        false,
    )
    .await
    .unwrap();
    let mut config = Config::default();
    config.scheduler.tick_ms = 200;
    config.scheduler.min_runtime_ms = 0;
    let state = switchyard::state(store.clone(), config);
    let router = switchyard::routes::app(state.clone());
    let driver = switchyard::start_scheduler(&state);
    let login = router
        .clone()
        .oneshot(
            Request::builder()
                .method(Method::POST)
                .uri("/api/v1/auth/login")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({"tenant": "bench", "username": "admin", "password": "bench-password-123"}).to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    let bytes = login.into_body().collect().await.unwrap().to_bytes();
    let token = serde_json::from_slice::<Value>(&bytes).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, g) = call(
        &router,
        Method::POST,
        "/api/v1/groups",
        &token,
        Some(json!({"name": "bench"})),
    )
    .await;
    // Room for every job: 1,250 nodes x 8 GPUs, eighths of a GPU per job.
    let nodes: Vec<Value> = (0..1250)
        .map(|i| json!({"name": format!("n{i}"), "gpus": 8, "gpu_model": "H100", "gpu_memory_mb": 81920}))
        .collect();
    let (s, pool) = call(
        &router,
        Method::POST,
        "/api/v1/pools",
        &token,
        Some(json!({"name": "sim", "executor": "simulated", "nodes": nodes})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{pool}");
    let (_, prof) = call(
        &router,
        Method::POST,
        "/api/v1/profiles",
        &token,
        Some(json!({"name": "eighth", "gpu_milli": 125})),
    )
    .await;
    let (_, pol) = call(&router, Method::POST, "/api/v1/policies", &token, Some(json!({"group_id": g["id"], "reservation_milli": 10_000_000, "limit_milli": 10_000_000}))).await;
    let (s, q) = call(&router, Method::POST, "/api/v1/queues", &token, Some(json!({"name": "q", "policy_id": pol["id"], "profile_id": prof["id"], "pools": [pool["id"]]}))).await;
    assert_eq!(s, StatusCode::CREATED, "{q}");
    let queue_id = q["id"].as_str().unwrap().to_string();

    let start = Instant::now();
    let per = n / clients;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let router = router.clone();
        let token = token.clone();
        let queue_id = queue_id.clone();
        tasks.push(tokio::spawn(async move {
            let job = |i: usize| json!({"queue_id": queue_id, "name": format!("j{c}-{i}"), "command": "x", "duration_ms": 3_600_000});
            if batch <= 1 {
                for i in 0..per {
                    let (s, b) = call(&router, Method::POST, "/api/v1/jobs", &token, Some(job(i))).await;
                    assert_eq!(s, StatusCode::CREATED, "{b}");
                }
            } else {
                let mut i = 0;
                while i < per {
                    let jobs: Vec<Value> = (i..(i + batch).min(per)).map(job).collect();
                    i += jobs.len();
                    let (s, b) = call(&router, Method::POST, "/api/v1/jobs/batch", &token, Some(json!({"jobs": jobs}))).await;
                    assert_eq!(s, StatusCode::CREATED, "{b}");
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let submitted = start.elapsed();
    let total = per * clients;
    loop {
        let running: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE state = 'running'")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        if running as usize >= total {
            break;
        }
        if start.elapsed() > Duration::from_secs(600) {
            panic!("only {running} of {total} running after 600 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all = start.elapsed();
    let stats = &state.scheduler.stats;
    println!(
        "{label:<10} {total} jobs, {clients} clients, {}: submitted in {:.2} s ({:.0} submits/s); all running after {:.2} s = {:.0} jobs/s end to end; {} cycles, last cycle {:.1} ms",
        if batch <= 1 { "one job per request".to_string() } else { format!("{batch} jobs per request") },
        submitted.as_secs_f64(),
        total as f64 / submitted.as_secs_f64(),
        all.as_secs_f64(),
        total as f64 / all.as_secs_f64(),
        stats.cycles.load(std::sync::atomic::Ordering::Relaxed),
        stats.last_cycle_us.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1000.0
    );
    driver.abort();
    let _ = driver.await;
    store.pool.close().await;
}

fn main() {
    // Errors behind a failed request (a 500 says no more) go to stderr.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let n: usize = std::env::var("JOBS_E2E_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let clients: usize = std::env::var("JOBS_E2E_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let batch: usize = std::env::var("JOBS_E2E_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    rt.block_on(async {
        sqlx::any::install_default_drivers();
        let base = std::env::var("SWITCHYARD_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let admin = sqlx::AnyPool::connect(&base).await.unwrap();
        let modes = std::env::var("JOBS_E2E_MODES").unwrap_or_else(|_| "single,batch".into());
        for (mode, b, c) in [("single", 1, clients), ("batch", batch, 4)] {
            if !modes.split(',').any(|m| m.trim() == mode) {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let sqlite = format!("sqlite://{}/bench.db", dir.path().display());
            run("sqlite", &sqlite, n, c, b).await;
            let schema = format!("sy_bench_{}_{mode}", std::process::id());
            sqlx::query(&format!("CREATE SCHEMA {schema}"))
                .execute(&admin)
                .await
                .unwrap();
            let sep = if base.contains('?') { '&' } else { '?' };
            run(
                "postgres",
                &format!("{base}{sep}options=-c%20search_path%3D{schema}"),
                n,
                c,
                b,
            )
            .await;
            sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
                .execute(&admin)
                .await
                .unwrap();
        }
    });
}
