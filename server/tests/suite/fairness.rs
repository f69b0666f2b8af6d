//! Node fit beyond GPUs and "why is my job waiting", through the REST API with the driver
//! running: a profile's CPU and memory are checked at submit and held on the node, a waiting
//! job's detail says what it lacks, where it stands in its queue, its group's use and fair
//! share, and who borrows; a queue's minimum runtime is validated.

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{group_queue, id, pool, profile, setup, submit, wait_state};

both_stores!(
    cpu_and_memory_of_the_profile_decide_node_fit,
    a_waiting_job_says_where_it_stands_and_who_borrows,
    a_queue_minimum_runtime_is_validated_and_shown
);

fn node(name: &str, gpus: u32, cpu_cores: u32, memory_mb: u64) -> serde_json::Value {
    json!({"name": name, "gpus": gpus, "gpu_model": "A100-80GB", "gpu_memory_mb": 81920, "cpu_cores": cpu_cores, "memory_mb": memory_mb})
}

async fn cpu_and_memory_of_the_profile_decide_node_fit(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    // One node: 4 GPUs but only 16 cores and 64 GiB.
    let p = pool(
        &app,
        &s,
        "thin",
        "simulated",
        json!([node("t1", 4, 16, 65_536)]),
    )
    .await;
    // Each job gets 1 GPU with 12 cores: two of them do not fit on the node together.
    let heavy = profile(
        &app,
        &s,
        json!({"name": "heavy", "gpu_milli": 1000, "cpu_milli": 12000, "memory_mb": 16384}),
    )
    .await;
    let q = group_queue(
        &app,
        &s,
        "train",
        json!({"reservation_milli": 4000, "limit_milli": 4000, "over_quota_weight": 1}),
        &heavy,
        &[&p],
        true,
    )
    .await;
    let first = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "a", "command": "true", "duration_ms": 600000}),
    )
    .await;
    wait_state(&app, &s.member, &first, "running").await;
    let second = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "b", "command": "true", "duration_ms": 600000}),
    )
    .await;
    let waiting = app
        .wait_for(
            &format!("/api/v1/jobs/{second}"),
            &s.member,
            "the second job's wait reason",
            |b| b["job"]["wait_code"] == "cpu",
        )
        .await;
    assert_eq!(
        waiting["job"]["state"], "queued",
        "3 GPUs are free, but no CPU"
    );
    let words = waiting["job"]["wait_reason"].as_str().unwrap();
    assert!(words.contains("CPU"), "{words}");

    // A profile larger than any node is refused at submit, at the field.
    let huge = profile(
        &app,
        &s,
        json!({"name": "huge", "gpu_milli": 1000, "cpu_milli": 32000}),
    )
    .await;
    let q2 = group_queue(
        &app,
        &s,
        "big",
        json!({"reservation_milli": 1000, "limit_milli": 1000, "over_quota_weight": 1}),
        &huge,
        &[&p],
        true,
    )
    .await;
    let r = app
        .post(
            "/api/v1/jobs",
            &s.member,
            json!({"queue_id": q2, "name": "c", "command": "true"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert!(r.text.contains("32 CPU cores"), "{}", r.text);
    app.finish().await;
}

async fn a_waiting_job_says_where_it_stands_and_who_borrows(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let p = pool(
        &app,
        &s,
        "two",
        "simulated",
        json!([node("n1", 2, 64, 524_288)]),
    )
    .await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    // "lend" reserves nothing and borrows both GPUs; "own" reserves one but may not borrow.
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
            json!({"queue_id": lend, "name": n, "command": "true", "duration_ms": 600000}),
        )
        .await;
        wait_state(&app, &s.member, &j, "running").await;
    }
    // Two more borrowers wait in "lend": the second of them is second in its queue.
    let _l3 = submit(
        &app,
        &s.member,
        json!({"queue_id": lend, "name": "l3", "command": "true"}),
    )
    .await;
    let l4 = submit(
        &app,
        &s.member,
        json!({"queue_id": lend, "name": "l4", "command": "true"}),
    )
    .await;
    let d = app
        .wait_for(&format!("/api/v1/jobs/{l4}"), &s.member, "l4's wait", |b| {
            b["job"]["wait_code"].is_string()
        })
        .await;
    let w = &d["waiting"];
    assert_eq!(w["position"], 2, "{d}");
    assert_eq!(w["queue_waiting"], 2);
    assert_eq!(w["group_name"], "lend");
    assert_eq!(w["group_used_milli"], 2000);
    assert_eq!(w["group_over_quota_milli"], 2000);
    // 2 GPUs, 1 reserved by "own": 1 GPU beyond reservations, and "lend" is the only borrower.
    assert_eq!(w["group_fair_share_milli"], 1000, "{w}");
    assert_eq!(
        w["borrowers"],
        json!([{"group_name": "lend", "gpu_milli": 2000}])
    );

    // "own" is owed its GPU: one of lend's jobs is stopped for it, and its detail names it.
    let mine = submit(
        &app,
        &s.member,
        json!({"queue_id": own, "name": "mine", "command": "true"}),
    )
    .await;
    let d = wait_state(&app, &s.member, &mine, "running").await;
    assert!(d.get("waiting").is_none(), "a running job has no wait: {d}");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM job_events WHERE to_state = 'preempting'")
            .await,
        1,
        "one borrower was stopped for it"
    );
    app.finish().await;
}

async fn a_queue_minimum_runtime_is_validated_and_shown(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let p = pool(&app, &s, "p", "simulated", json!([node("n1", 1, 8, 8192)])).await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let g = app
        .post("/api/v1/groups", &s.admin, json!({"name": "g"}))
        .await;
    let pol = app
        .post(
            "/api/v1/policies",
            &s.admin,
            json!({"group_id": id(&g.body), "reservation_milli": 0, "limit_milli": 1000, "over_quota_weight": 1}),
        )
        .await;
    let bad = app
        .post("/api/v1/queues", &s.admin, json!({"name": "q", "policy_id": id(&pol.body), "profile_id": one, "pools": [p], "min_runtime_ms": -5}))
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert!(bad.text.contains("min_runtime_ms"), "{}", bad.text);
    let ok = app
        .post("/api/v1/queues", &s.admin, json!({"name": "q", "policy_id": id(&pol.body), "profile_id": one, "pools": [p], "min_runtime_ms": 600000}))
        .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.text);
    assert_eq!(ok.body["min_runtime_ms"], 600000);
    app.finish().await;
}
