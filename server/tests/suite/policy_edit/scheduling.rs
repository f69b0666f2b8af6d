//! Changes the scheduler acts on at its next cycle: a pool change that would strand running
//! jobs is refused, a raised limit (or per-pool quota) starts the job waiting over it, and a
//! queue given another pool places its waiting job there.

use axum::http::StatusCode;
use serde_json::json;

use super::{assert_status, audit, objects};
use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{group_queue, node, pool, profile, setup, submit, wait_state};

both_stores!(
    a_pool_change_that_strands_running_jobs_is_refused,
    a_raised_limit_starts_the_job_waiting_over_it,
    a_queue_given_another_pool_places_its_waiting_job_there
);

async fn a_pool_change_that_strands_running_jobs_is_refused(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let p = pool(
        &app,
        &s,
        "sim",
        "simulated",
        json!([node("n1", 4), node("n2", 4)]),
    )
    .await;
    let whole = profile(&app, &s, json!({"name": "two", "gpu_milli": 2000})).await;
    let q = group_queue(
        &app,
        &s,
        "vision",
        json!({"reservation_milli": 8000, "limit_milli": 8000, "over_quota_weight": 1}),
        &whole,
        &[&p],
        true,
    )
    .await;
    // Three 2-GPU jobs: both GPUs pairs of one node, and one on the other.
    let mut jobs = Vec::new();
    for i in 0..3 {
        let j = submit(
            &app,
            &s.member,
            json!({"queue_id": q, "name": format!("j{i}"), "command": "x", "duration_ms": 600000}),
        )
        .await;
        jobs.push(j);
    }
    let mut busy = std::collections::HashMap::<String, usize>::new();
    for j in &jobs {
        let d = wait_state(&app, &s.member, j, "running").await;
        *busy
            .entry(d["job"]["node_name"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let full = busy
        .iter()
        .find(|(_, n)| **n == 2)
        .map(|(k, _)| k.clone())
        .unwrap();
    let half = busy
        .iter()
        .find(|(_, n)| **n == 1)
        .map(|(k, _)| k.clone())
        .unwrap();
    let nodes_with = |full_gpus: u32, half_gpus: u32| {
        let g = |name: &str| if name == full { full_gpus } else { half_gpus };
        json!({"nodes": [node("n1", g("n1")), node("n2", g("n2"))]})
    };
    let path = format!("/api/v1/pools/{p}");
    for (what, body) in [
        (
            "a busy node removed",
            json!({"nodes": [node(if full == "n1" { "n2" } else { "n1" }, 4)]}),
        ),
        (
            "a busy node renamed",
            json!({"nodes": [node("x1", 4), node("x2", 4)]}),
        ),
        (
            "busy nodes swapped",
            json!({"nodes": [node("n2", 4), node("n1", 4)]}),
        ),
        ("fewer GPUs than in use", nodes_with(2, 4)),
    ] {
        let r = app.patch(&path, &s.admin, body).await;
        assert_status(&r, StatusCode::CONFLICT, what);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("strand running jobs")
                && (detail.contains(&format!("on node {full}"))
                    || detail.contains(&format!("on node {half}"))),
            "{what}: {detail}"
        );
    }
    let r = app.patch(&path, &s.admin, nodes_with(2, 4)).await;
    assert!(
        r.body["detail"]
            .as_str()
            .unwrap()
            .contains("at least 4 GPUs"),
        "{}",
        r.text
    );
    // Jobs as processes on the server's host are a platform admin's decision.
    let r = app
        .patch(&path, &s.admin, json!({"executor": "local"}))
        .await;
    assert_status(
        &r,
        StatusCode::FORBIDDEN,
        "a tenant admin makes a pool local",
    );
    // What the jobs do not use may change: a node more, another price.
    let r = app
        .patch(
            &path,
            &s.admin,
            json!({"nodes": [node("n1", 4), node("n2", 4), node("n3", 8)], "gpu_hour_cost_cents": 300}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "a change that keeps the jobs");
    for j in &jobs {
        assert_eq!(
            crate::jobs::job(&app, &s.member, j).await["job"]["state"],
            "running"
        );
    }
    // Only the successful change was written.
    assert_eq!(audit(&app, &s.admin, "pool.update").await.len(), 1);
    app.finish().await;
}

async fn a_raised_limit_starts_the_job_waiting_over_it(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let (p, _flex, policy, q) = objects(&app, &s, 1000).await;
    let a = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "a", "command": "x", "gpu_milli": 1000, "duration_ms": 600000}),
    )
    .await;
    wait_state(&app, &s.member, &a, "running").await;
    let b = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "b", "command": "x", "gpu_milli": 1000, "duration_ms": 600000}),
    )
    .await;
    app.wait_for(
        &format!("/api/v1/jobs/{b}"),
        &s.member,
        "b waits over its limit",
        |d| d["job"]["wait_code"] == "over_limit",
    )
    .await;
    let group = app
        .get(&format!("/api/v1/policies/{policy}"), &s.admin)
        .await
        .body["group_id"]
        .clone();
    // A per-pool quota of 1 GPU on the pool: raising the overall limit is not enough.
    let r = app
        .post(
            "/api/v1/policies",
            &s.admin,
            json!({"group_id": group, "reservation_milli": 1000, "limit_milli": 2000,
                   "pools": [{"pool_id": p, "reservation_milli": 1000, "limit_milli": 1000}]}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "limit raised, pool quota kept");
    app.wait_for(
        &format!("/api/v1/jobs/{b}"),
        &s.member,
        "b waits for the pool's quota",
        |d| d["job"]["state"] == "queued" && d["job"]["wait_code"] != "over_limit",
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        crate::jobs::job(&app, &s.member, &b).await["job"]["state"],
        "queued"
    );
    // The pool's quota raised too: it starts.
    let r = app
        .post(
            "/api/v1/policies",
            &s.admin,
            json!({"group_id": group, "reservation_milli": 1000, "limit_milli": 2000,
                   "pools": [{"pool_id": p, "reservation_milli": 1000, "limit_milli": 2000}]}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "pool quota raised");
    wait_state(&app, &s.member, &b, "running").await;
    app.finish().await;
}

async fn a_queue_given_another_pool_places_its_waiting_job_there(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let (_p, _flex, _policy, q) = objects(&app, &s, 4000).await;
    let big = pool(&app, &s, "big", "simulated", json!([node("b1", 4)])).await;
    let a = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "a", "command": "x", "gpu_milli": 2000, "duration_ms": 600000}),
    )
    .await;
    wait_state(&app, &s.member, &a, "running").await;
    let b = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "b", "command": "x", "gpu_milli": 2000, "duration_ms": 600000}),
    )
    .await;
    app.wait_for(
        &format!("/api/v1/jobs/{b}"),
        &s.member,
        "b waits: the small pool is full",
        |d| d["job"]["state"] == "queued" && !d["job"]["wait_code"].is_null(),
    )
    .await;
    let r = app
        .patch(
            &format!("/api/v1/queues/{q}"),
            &s.admin,
            json!({"pools": [big]}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "queue moved to the big pool");
    let d = wait_state(&app, &s.member, &b, "running").await;
    assert_eq!(d["job"]["pool_id"], big.as_str());
    // The job already running stays where it is.
    let d = crate::jobs::job(&app, &s.member, &a).await;
    assert_eq!(d["job"]["state"], "running");
    assert_eq!(d["job"]["node_name"], "a1");
    app.finish().await;
}
