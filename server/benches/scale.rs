//! At scale: the demo tenants plus N waiting jobs in one queue, served by the real router and
//! the real driver in this process. Prints one row per store and N: the process's CPU while
//! idle, the Policy Manager and a member's portal (SSR, signed in with a session cookie),
//! `GET /api/v1/jobs?limit=50`, submit → running of a job that fits, and the driver's cycle.
//!
//! `cargo bench -p switchyard --bench scale` (PostgreSQL at SWITCHYARD_TEST_POSTGRES or
//! 127.0.0.1:5432, a fresh schema per row). SCALE_N lists the waiting jobs per row (default
//! `0,10000,100000`), SCALE_STORES the stores (default `sqlite,postgres`). SCALE_EXTRA_SQL
//! (statements separated by `;`) runs once on each fresh database before anything else, to
//! try an index, say.
//!
//! Setup per row: `demo::seed` (three tenants, two simulated pools, four queues, 21 jobs);
//! acme adds a simulated pool of 1,250 nodes × 8 GPUs and a queue on it for its inference
//! group (the job that fits goes there); then N copies of one of dan's jobs are written
//! straight into the store (in batches, with the template's wait reason) in the `etl` queue,
//! whose group is at its limit, so they wait. The row starts once the Policy Manager's
//! overview counts them all and the driver has run two cycles after its overlap window. Idle
//! CPU is this process's user + system time over 5 s with no request (PostgreSQL's own CPU is
//! not in it), with the driver's cycles in that window and how many of them were quiet
//! (nothing changed since a settled cycle: the core skipped); the cycle is the median of the
//! driver's cycles that ran the core, from the start of the idle window to the end of the row.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sqlx::Row;
use tower::ServiceExt;

use switchyard::config::Config;
use switchyard::store::{new_id, Store};

const PASSWORD: &str = switchyard::demo::PASSWORD;

enum Auth<'a> {
    Token(&'a str),
    Cookie(&'a str),
}

async fn call(
    router: &axum::Router,
    method: Method,
    path: &str,
    auth: Auth<'_>,
    body: Option<Value>,
) -> (StatusCode, String) {
    let mut b = Request::builder().method(method).uri(path);
    b = match auth {
        Auth::Token(t) => b.header(header::AUTHORIZATION, format!("Bearer {t}")),
        Auth::Cookie(c) => b.header(header::COOKIE, c),
    };
    let req = match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    };
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

async fn json_call(
    router: &axum::Router,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (s, text) = call(router, method, path, Auth::Token(token), body).await;
    (s, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn token(router: &axum::Router, username: &str) -> String {
    let req = Request::post("/api/v1/auth/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"tenant": "acme", "username": username, "password": PASSWORD}).to_string(),
        ))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice::<Value>(&bytes).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Signs in through the web form; returns the session cookie.
async fn cookie(router: &axum::Router, username: &str) -> String {
    let req = Request::post("/auth/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!(
            "tenant=acme&username={username}&password={PASSWORD}&next=%2Fportal"
        )))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let set = resp.headers()[header::SET_COOKIE].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

/// User + system CPU ticks per thread (name, ticks), to see what runs while idle.
fn thread_ticks() -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let name = stat
            .split_once('(')
            .and_then(|(_, r)| r.rsplit_once(')'))
            .map(|(n, _)| n.to_string())
            .unwrap_or_default();
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        out.push((
            t.file_name().to_string_lossy().into_owned(),
            name,
            ticks(11) + ticks(12),
        ));
    }
    out
}

/// User + system CPU time of this process, in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    (ticks(11) + ticks(12)) / 100.0
}

fn p50(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn timed<F, Fut>(n: usize, mut f: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut t = Vec::with_capacity(n);
    for _ in 0..n {
        let s = Instant::now();
        f().await;
        t.push(s.elapsed().as_secs_f64() * 1000.0);
    }
    p50(t)
}

/// Writes `n` copies of job `template` (new ids and names, the same queue, user and wait
/// reason) in batches.
async fn copy_jobs(store: &Store, template: &str, n: usize) {
    const COLS: &str = "tenant_id, queue_id, group_id, user_id, username, command, image, env, gpu_milli, gpu_memory_mb, priority_class, priority, preemptible,
        abort_kind, abort_command, abort_timeout_ms, checkpoint_dir, max_runtime_ms, duration_ms, state, wait_code, wait_reason, submitted_at, queued_at";
    let mut done = 0;
    let mut tx = store.pool.begin().await.unwrap();
    while done < n {
        let rows = (n - done).min(190);
        let values = (0..rows)
            .map(|r| format!("(${}, ${})", 3 + 2 * r, 4 + 2 * r))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO jobs (id, name, {COLS}, updated_at) SELECT v.column1, v.column2, {}, $2 FROM (VALUES {values}) AS v CROSS JOIN jobs t WHERE t.id = $1",
            COLS.split(',')
                .map(|c| format!("t.{}", c.trim()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut q = sqlx::query(&sql)
            .bind(template.to_string())
            .bind(store.now());
        for i in done..done + rows {
            q = q.bind(new_id()).bind(format!("etl-wait-{i}"));
        }
        q.execute(&mut *tx).await.unwrap();
        done += rows;
    }
    tx.commit().await.unwrap();
}

struct Figures {
    idle_cpu: f64,
    idle_cycles: u64,
    /// Of the idle cycles, those that found nothing changed and skipped the core.
    idle_quiet: u64,
    policy: f64,
    portal: f64,
    jobs: f64,
    submit: f64,
    cycle: f64,
}

async fn run(url: &str, n: usize) -> Figures {
    let store = Store::connect(url).await.unwrap();
    if let Ok(sql) = std::env::var("SCALE_EXTRA_SQL") {
        for stmt in sql.split(';').filter(|s| !s.trim().is_empty()) {
            sqlx::query(stmt).execute(&store.pool).await.unwrap();
        }
    }
    assert!(switchyard::demo::seed(&store).await.unwrap());
    let config = Config::default();
    let state = switchyard::state(store.clone(), config);
    let router = switchyard::routes::app(state.clone());
    let driver = switchyard::start_scheduler(&state);
    let alice = token(&router, "alice").await;
    let carol = token(&router, "carol").await;
    let dan = token(&router, "dan").await;

    // A pool of 10,000 GPUs and a queue on it for inference: the job that fits.
    let nodes: Vec<Value> = (0..1250)
        .map(|i| json!({"name": format!("fit-{i}"), "gpus": 8, "gpu_model": "H100", "gpu_memory_mb": 81920}))
        .collect();
    let (s, pool) = json_call(
        &router,
        Method::POST,
        "/api/v1/pools",
        &alice,
        Some(json!({"name": "fit", "executor": "simulated", "nodes": nodes})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{pool}");
    let (s, prof) = json_call(
        &router,
        Method::POST,
        "/api/v1/profiles",
        &alice,
        Some(json!({"name": "fit-one", "gpu_milli": 1000})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{prof}");
    let policy: String = sqlx::query_scalar(
        "SELECT p.id FROM policies p JOIN groups g ON g.id = p.group_id WHERE g.name = 'inference'",
    )
    .fetch_one(&store.pool)
    .await
    .unwrap();
    let (s, fit) = json_call(&router, Method::POST, "/api/v1/queues", &alice, Some(json!({"name": "fit", "policy_id": policy, "profile_id": prof["id"], "pools": [pool["id"]]}))).await;
    assert_eq!(s, StatusCode::CREATED, "{fit}");
    let fit = fit["id"].as_str().unwrap().to_string();

    // One of dan's jobs in `etl` (its group is at its limit), once the driver has given it its
    // wait reason, then N-1 copies of it.
    let etl: String = sqlx::query_scalar("SELECT id FROM queues WHERE name = 'etl'")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    let mut copied = None;
    let waiting = if n > 0 {
        let (s, j) = json_call(&router, Method::POST, "/api/v1/jobs", &dan, Some(json!({"queue_id": etl, "name": "etl-wait", "command": "x", "duration_ms": 3_600_000}))).await;
        assert_eq!(s, StatusCode::CREATED, "{j}");
        let id = j["id"].as_str().unwrap().to_string();
        let t = Instant::now();
        loop {
            let code: Option<String> =
                sqlx::query_scalar("SELECT wait_code FROM jobs WHERE id = $1")
                    .bind(&id)
                    .fetch_one(&store.pool)
                    .await
                    .unwrap();
            if code.is_some() {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "no wait reason");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        copy_jobs(&store, &id, n - 1).await;
        copied = Some(Instant::now());
        n
    } else {
        0
    };
    // The demo's own waiting jobs in `etl` come on top.
    let demo_waiting: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE queue_id = $1 AND state = 'queued'")
            .bind(&etl)
            .fetch_one(&store.pool)
            .await
            .unwrap();
    assert!(demo_waiting as usize >= waiting);
    let t = Instant::now();
    loop {
        let (s, o) = json_call(
            &router,
            Method::GET,
            "/api/v1/scheduling/overview",
            &alice,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{o}");
        let seen = o["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["queue_id"] == etl.as_str())
            .map(|q| q["waiting"].as_i64().unwrap())
            .unwrap();
        if seen == demo_waiting {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "the overview shows {seen} of {demo_waiting} waiting"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The driver re-reads rows changed within its overlap window (5 s) each cycle: the row
    // starts once the copies are past it and two more cycles have run (a steady state).
    if let Some(at) = copied {
        tokio::time::sleep_until((at + Duration::from_secs(6)).into()).await;
        let stats = &state.scheduler.stats;
        let c = stats.cycles.load(std::sync::atomic::Ordering::Relaxed);
        while stats.cycles.load(std::sync::atomic::Ordering::Relaxed) < c + 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let alice_web = cookie(&router, "alice").await;
    let dan_web = cookie(&router, "dan").await;
    // Let what the setup started settle, then measure an idle window.
    tokio::time::sleep(Duration::from_secs(2)).await;
    state.scheduler.stats.recent_cycles_us(true);
    let stats = &state.scheduler.stats;
    let (n0, q0) = (
        stats.cycles.load(std::sync::atomic::Ordering::Relaxed),
        stats
            .quiet_cycles
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    let c0 = cpu_seconds();
    let probe = std::env::var("SCALE_IDLE_PROBE").is_ok();
    let t0 = if probe { thread_ticks() } else { Vec::new() };
    let w0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    if probe {
        for (tid, name, after) in thread_ticks() {
            let before = t0.iter().find(|t| t.0 == tid).map_or(0, |t| t.2);
            if after > before {
                eprintln!("idle: thread {tid} {name}: {} ticks", after - before);
            }
        }
    }
    let idle_cpu = (cpu_seconds() - c0) / w0.elapsed().as_secs_f64() * 100.0;
    let idle_cycles = stats.cycles.load(std::sync::atomic::Ordering::Relaxed) - n0;
    let idle_quiet = stats
        .quiet_cycles
        .load(std::sync::atomic::Ordering::Relaxed)
        - q0;

    let (r, alice_web, dan_web, alice_token) = (&router, &alice_web, &dan_web, &alice);
    let policy = timed(15, || async move {
        let (s, body) = call(r, Method::GET, "/policy", Auth::Cookie(alice_web), None).await;
        assert_eq!(s, StatusCode::OK);
        assert!(body.contains("etl"), "the Policy Manager lists the queue");
    })
    .await;
    let portal = timed(15, || async move {
        let (s, body) = call(r, Method::GET, "/portal", Auth::Cookie(dan_web), None).await;
        assert_eq!(s, StatusCode::OK);
        assert!(
            body.contains("data-eng"),
            "the portal shows the member's group"
        );
    })
    .await;
    let jobs = timed(30, || async move {
        let (s, body) = call(
            r,
            Method::GET,
            "/api/v1/jobs?limit=50",
            Auth::Token(alice_token),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{body}");
    })
    .await;
    let mut submits = Vec::new();
    for i in 0..10 {
        let t = Instant::now();
        let (s, j) = json_call(&router, Method::POST, "/api/v1/jobs", &carol, Some(json!({"queue_id": fit, "name": format!("fit-{i}"), "command": "x", "duration_ms": 3_600_000}))).await;
        assert_eq!(s, StatusCode::CREATED, "{j}");
        let id = j["id"].as_str().unwrap().to_string();
        loop {
            let st: String = sqlx::query("SELECT state FROM jobs WHERE id = $1")
                .bind(&id)
                .fetch_one(&store.pool)
                .await
                .unwrap()
                .try_get("state")
                .unwrap();
            if st == "running" {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{id} is {st} after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        submits.push(t.elapsed().as_secs_f64() * 1000.0);
        let (s, b) = json_call(
            &router,
            Method::POST,
            &format!("/api/v1/jobs/{id}/abort"),
            &carol,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let cycles: Vec<f64> = state
        .scheduler
        .stats
        .recent_cycles_us(false)
        .into_iter()
        .map(|us| us as f64 / 1000.0)
        .collect();
    driver.abort();
    let _ = driver.await;
    store.pool.close().await;
    Figures {
        idle_cpu,
        idle_cycles,
        idle_quiet,
        policy,
        portal,
        jobs,
        submit: p50(submits),
        cycle: p50(cycles),
    }
}

fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let ns: Vec<usize> = std::env::var("SCALE_N")
        .unwrap_or_else(|_| "0,10000,100000".into())
        .split(',')
        .map(|v| {
            v.trim()
                .parse()
                .expect("SCALE_N: numbers separated by commas")
        })
        .collect();
    let stores = std::env::var("SCALE_STORES").unwrap_or_else(|_| "sqlite,postgres".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        sqlx::any::install_default_drivers();
        let base = std::env::var("SWITCHYARD_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        println!("| store | waiting jobs | idle CPU (% of a core, cycles in 5 s, of them quiet) | Policy Manager SSR p50 | member portal SSR p50 | GET /jobs?limit=50 p50 | submit → running p50 | driver cycle p50 |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        for store in stores.split(',').map(str::trim) {
            for &n in &ns {
                let row = match store {
                    "sqlite" => {
                        let dir = tempfile::tempdir().unwrap();
                        run(&format!("sqlite://{}/scale.db", dir.path().display()), n).await
                    }
                    "postgres" => {
                        let admin = sqlx::AnyPool::connect(&base).await.unwrap();
                        let schema = format!("sy_scale_{}_{n}", std::process::id());
                        sqlx::query(&format!("CREATE SCHEMA {schema}"))
                            .execute(&admin)
                            .await
                            .unwrap();
                        let sep = if base.contains('?') { '&' } else { '?' };
                        let row = run(
                            &format!("{base}{sep}options=-c%20search_path%3D{schema}"),
                            n,
                        )
                        .await;
                        sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
                            .execute(&admin)
                            .await
                            .unwrap();
                        admin.close().await;
                        row
                    }
                    other => panic!("SCALE_STORES: unknown store {other}"),
                };
                println!(
                    "| {store} | {n} | {:.1} % ({}, {}) | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} ms | {:.1} ms |",
                    row.idle_cpu, row.idle_cycles, row.idle_quiet, row.policy, row.portal, row.jobs, row.submit, row.cycle
                );
            }
        }
    });
}
