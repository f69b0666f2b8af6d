//! An idle scheduler: once a cycle has decided nothing new, the driver's later cycles skip
//! the core while no job row, configuration or time-based rule changes (the once-a-second
//! cycle over 100k waiting jobs was the idle server's CPU), yet it acts as soon as time alone
//! changes a decision: here a borrower's minimum runtime ends while nothing else happens.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{group_queue, pool, profile, setup, submit, wait_state};

both_stores!(a_quiet_scheduler_still_reclaims_when_a_protection_ends);

/// Waits until the driver has run `n` more quiet cycles (10 s at most).
async fn quiet_cycles(app: &TestApp, n: u64, what: &str) {
    let stats = &app.state.scheduler.stats;
    let start = stats.quiet_cycles.load(Ordering::Relaxed);
    let t0 = Instant::now();
    while stats.quiet_cycles.load(Ordering::Relaxed) < start + n {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no quiet cycles while {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_quiet_scheduler_still_reclaims_when_a_protection_ends(kind: Kind) {
    let app = TestApp::with_scheduler_and_manual_clock(kind).await;
    let s = setup(&app, "acme").await;
    let p = pool(
        &app,
        &s,
        "two",
        "simulated",
        json!([{"name": "n1", "gpus": 2, "gpu_model": "A100-80GB", "gpu_memory_mb": 81920}]),
    )
    .await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let lend = group_queue(
        &app,
        &s,
        "lend",
        json!({"reservation_milli": 0, "limit_milli": 2000, "over_quota_weight": 1}),
        &one,
        &[&p],
        true,
    )
    .await;
    // The borrowers' jobs are protected for 30 s of the test's clock (under the driver's
    // longest quiet stretch, 60 s, so only the protection's end can wake it in time).
    let r = app
        .patch(
            &format!("/api/v1/queues/{lend}"),
            &s.admin,
            json!({"min_runtime_ms": 30_000}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let own = group_queue(
        &app,
        &s,
        "own",
        json!({"reservation_milli": 1000, "limit_milli": 1000, "over_quota_weight": 1}),
        &one,
        &[&p],
        true,
    )
    .await;
    for n in ["l1", "l2"] {
        let j = submit(
            &app,
            &s.member,
            json!({"queue_id": lend, "name": n, "command": "true", "duration_ms": 3_600_000}),
        )
        .await;
        wait_state(&app, &s.member, &j, "running").await;
    }
    let mine = submit(
        &app,
        &s.member,
        json!({"queue_id": own, "name": "mine", "command": "true", "duration_ms": 3_600_000}),
    )
    .await;
    let d = app
        .wait_for(
            &format!("/api/v1/jobs/{mine}"),
            &s.member,
            "mine's wait",
            |b| b["job"]["wait_code"].is_string(),
        )
        .await;
    assert_eq!(d["job"]["state"], "queued", "{d}");
    let words = d["job"]["wait_reason"].as_str().unwrap_or_default();
    assert!(words.contains("minimum runtime"), "{words}");

    // Nothing changes: the driver settles and its cycles go quiet; the job still waits.
    quiet_cycles(&app, 5, "the borrowers are protected").await;
    let d = app.get(&format!("/api/v1/jobs/{mine}"), &s.member).await;
    assert_eq!(d.body["job"]["state"], "queued", "{}", d.text);

    // Time alone ends the protection: a borrower is stopped and the job runs.
    app.advance_clock(30_001);
    wait_state(&app, &s.member, &mine, "running").await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM job_events WHERE to_state = 'preempting'")
            .await,
        1,
        "one borrower was stopped for it"
    );
    app.finish().await;
}
