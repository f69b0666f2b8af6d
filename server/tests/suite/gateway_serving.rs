//! Serving jobs as an endpoint's instances: a job that declares the endpoint and its port runs
//! as a real process on a local pool; once it runs and its port answers, the gateway sends the
//! endpoint's calls to it, and when it ends they stop going there.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{call, client, ports, setup};
use crate::jobs::{group_queue, profile, wait_state, Setup};
use crate::local_jobs::local_pool;

both_stores!(a_serving_job_becomes_an_instance_while_it_runs);

/// A port for the job to listen on: one of a block this test has to itself, outside the
/// ephemeral range. (A port the kernel had just handed out and taken back could be handed to
/// another test's listener before the job binds it: the job then fails to start, or the
/// gateway's probe finds the other test's server.)
fn job_port() -> u16 {
    *ports().start()
}

async fn a_serving_job_becomes_an_instance_while_it_runs(kind: Kind) {
    let mut app = TestApp::with_scheduler(kind).await;
    let range = ports();
    app.reconfigure(|c| c.gateway.ports = range);
    // The endpoint starts with no instance at all.
    let gw = setup(app, &[]).await;
    let me = gw.app.get("/api/v1/me", &gw.admin).await;
    let tenant_id = me.body["tenant_id"].as_str().unwrap().to_string();
    let pool = local_pool(&gw.app, &tenant_id, 1, 1000).await;
    let s = Setup {
        admin: gw.admin.clone(),
        member: gw.member.clone(),
    };
    let one = profile(&gw.app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let queue = group_queue(
        &gw.app,
        &s,
        "serve",
        json!({"reservation_milli": 1000, "limit_milli": 1000, "over_quota_weight": 1}),
        &one,
        &[&pool],
        true,
    )
    .await;
    let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "t"})).await;
    let url = format!("{}/v1/", gw.prod_url);
    let (s503, body) = call(&url, Some(&token)).await;
    assert_eq!(s503, 503, "no instance yet: {body}");
    assert_eq!(body["source"], "upstream");

    // Deploying needs `manage` on the endpoint (the member only may `use` it), and a port
    // a job may open.
    let port = job_port();
    let job = |port: u16| {
        json!({"queue_id": queue, "name": "llama-server",
               "command": "mkdir -p v1 && exec python3 -m http.server \"$PORT\" --bind 127.0.0.1",
               "serve": {"endpoint_id": gw.endpoint, "port": port}})
    };
    let r = gw.app.post("/api/v1/jobs", &gw.member, job(port)).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(
        r.body["errors"][0]["field"], "serve.endpoint_id",
        "{}",
        r.text
    );
    let r = gw.app.post("/api/v1/jobs", &gw.admin, job(80)).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(r.body["errors"][0]["field"], "serve.port", "{}", r.text);

    let r = gw.app.post("/api/v1/jobs", &gw.admin, job(port)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["serve"]["port"], port);
    let job_id = r.body["id"].as_str().unwrap().to_string();
    wait_state(&gw.app, &gw.admin, &job_id, "running").await;

    // Once its port answers, the endpoint's calls reach the job's process.
    let t0 = Instant::now();
    loop {
        let r = client().get(&url).bearer_auth(&token).send().await.unwrap();
        if r.status() == 200 {
            let text = r.text().await.unwrap();
            assert!(text.contains("Directory listing"), "{text}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the running serving job never became an instance ({})",
            r.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The job ends: its instance is gone, the endpoint has none left.
    let r = gw
        .app
        .post(
            &format!("/api/v1/jobs/{job_id}/abort"),
            &gw.admin,
            json!({}),
        )
        .await;
    assert!(r.status.is_success(), "{}", r.text);
    wait_state(&gw.app, &gw.admin, &job_id, "aborted").await;
    let t0 = Instant::now();
    loop {
        let (s, _) = call(&url, Some(&token)).await;
        if s == 503 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the ended job still serves ({s})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    gw.app.finish().await;
}
