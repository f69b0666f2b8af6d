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
    a_queue_minimum_runtime_is_validated_and_shown,
    per_pool_quotas_bound_a_group_on_each_pool,
    a_pool_quota_is_what_a_policy_reserves_on_a_shared_pool
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

async fn per_pool_quotas_bound_a_group_on_each_pool(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let fast = pool(
        &app,
        &s,
        "fast",
        "simulated",
        json!([node("f1", 4, 64, 524_288)]),
    )
    .await;
    let slow = pool(
        &app,
        &s,
        "slow",
        "simulated",
        json!([node("s1", 4, 64, 524_288)]),
    )
    .await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let g = app
        .post("/api/v1/groups", &s.admin, json!({"name": "train"}))
        .await;
    let member_id = app.user_id(&s.admin, "member").await;
    app.post(
        &format!("/api/v1/groups/{}/members", id(&g.body)),
        &s.admin,
        json!({ "user_id": member_id }),
    )
    .await;
    // Bad quotas are refused at the field, and nothing is stored.
    for (bad, why) in [
        (
            json!([{"pool_id": fast, "reservation_milli": 3000, "limit_milli": 2000}]),
            "between 0 and its limit",
        ),
        (
            json!([{"pool_id": fast, "reservation_milli": 0, "limit_milli": 9000}]),
            "at most the policy's limit",
        ),
        (
            json!([{"pool_id": "nope", "reservation_milli": 0, "limit_milli": 1000}]),
            "no such pool",
        ),
        (
            json!([{"pool_id": fast, "reservation_milli": 0, "limit_milli": 1000}, {"pool_id": fast, "reservation_milli": 0, "limit_milli": 1000}]),
            "one quota only",
        ),
    ] {
        let r = app
            .post("/api/v1/policies", &s.admin, json!({"group_id": id(&g.body), "reservation_milli": 4000, "limit_milli": 8000, "pools": bad}))
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
        assert!(r.text.contains(why), "{why}: {}", r.text);
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM policy_pools").await, 0);
    // At most 2 GPUs on the fast pool; the queue spills over to the slow one.
    let pol = app
        .post("/api/v1/policies", &s.admin, json!({"group_id": id(&g.body), "reservation_milli": 4000, "limit_milli": 8000, "pools": [{"pool_id": fast, "reservation_milli": 2000, "limit_milli": 2000}]}))
        .await;
    assert_eq!(pol.status, StatusCode::OK, "{}", pol.text);
    assert_eq!(pol.body["pools"][0]["pool_name"], "fast");
    assert_eq!(pol.body["pools"][0]["limit_milli"], 2000);
    let q = app
        .post("/api/v1/queues", &s.admin, json!({"name": "train-q", "policy_id": id(&pol.body), "profile_id": one, "pools": [fast, slow]}))
        .await;
    let q = id(&q.body);
    let mut jobs = Vec::new();
    for n in 0..4 {
        jobs.push(submit(&app, &s.member, json!({"queue_id": q, "name": format!("j{n}"), "command": "true", "duration_ms": 600000})).await);
    }
    let mut on_fast = 0;
    for j in &jobs {
        let d = wait_state(&app, &s.member, j, "running").await;
        if d["job"]["pool_id"] == fast.as_str() {
            on_fast += 1;
        }
    }
    assert_eq!(on_fast, 2, "2 on the fast pool, 2 spilled over");
    // Setting the policy without `pools` keeps its quotas; `[]` removes them.
    let kept = app
        .post(
            "/api/v1/policies",
            &s.admin,
            json!({"group_id": id(&g.body), "reservation_milli": 4000, "limit_milli": 8000}),
        )
        .await;
    assert_eq!(
        kept.body["pools"].as_array().unwrap().len(),
        1,
        "{}",
        kept.text
    );
    let cleared = app
        .post("/api/v1/policies", &s.admin, json!({"group_id": id(&g.body), "reservation_milli": 4000, "limit_milli": 8000, "pools": []}))
        .await;
    assert_eq!(cleared.body["pools"], json!([]), "{}", cleared.text);
    app.finish().await;
}

async fn a_pool_quota_is_what_a_policy_reserves_on_a_shared_pool(kind: Kind) {
    let app = TestApp::new(kind).await;
    let tenant_id = app.seed_tenant("acme").await;
    let s = setup_existing(&app).await;
    let root = app.seed_platform_admin().await;
    let shared = app
        .post("/api/v1/pools", &root, json!({"name": "shared", "executor": "simulated", "shared": true, "nodes": [node("x1", 8, 64, 524_288)]}))
        .await;
    let shared = id(&shared.body);
    let g = app
        .call(
            axum::http::Method::PUT,
            &format!("/api/v1/pools/{shared}/grants/{tenant_id}"),
            Some(&root),
            Some(json!({ "reservation_milli": 1000 })),
        )
        .await;
    assert_eq!(g.status, StatusCode::OK, "{}", g.text);
    let own = pool(
        &app,
        &s,
        "own",
        "simulated",
        json!([node("o1", 4, 64, 524_288)]),
    )
    .await;
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let grp = app
        .post("/api/v1/groups", &s.admin, json!({"name": "train"}))
        .await;
    // 4 GPUs reserved, 1 of them on the shared pool (the rest on the tenant's own).
    let pol = app
        .post("/api/v1/policies", &s.admin, json!({"group_id": id(&grp.body), "reservation_milli": 4000, "limit_milli": 4000, "pools": [{"pool_id": shared, "reservation_milli": 1000, "limit_milli": 2000}]}))
        .await;
    assert_eq!(pol.status, StatusCode::OK, "{}", pol.text);
    let q = app
        .post("/api/v1/queues", &s.admin, json!({"name": "q", "policy_id": id(&pol.body), "profile_id": one, "pools": [own, shared]}))
        .await;
    assert_eq!(q.status, StatusCode::CREATED, "{}", q.text);
    // Raising the reservation on the shared pool beyond the grant is refused...
    let over = app
        .post("/api/v1/policies", &s.admin, json!({"group_id": id(&grp.body), "reservation_milli": 4000, "limit_milli": 4000, "pools": [{"pool_id": shared, "reservation_milli": 2000, "limit_milli": 2000}]}))
        .await;
    assert_eq!(
        over.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        over.text
    );
    assert!(over.text.contains("granted 1000"), "{}", over.text);
    // ...and so is removing the quota (the whole 4 GPUs would count on the shared pool).
    let whole = app
        .post("/api/v1/policies", &s.admin, json!({"group_id": id(&grp.body), "reservation_milli": 4000, "limit_milli": 4000, "pools": []}))
        .await;
    assert_eq!(
        whole.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        whole.text
    );
    let stored = app
        .get(&format!("/api/v1/policies/{}", id(&pol.body)), &s.admin)
        .await;
    assert_eq!(
        stored.body["pools"][0]["reservation_milli"], 1000,
        "unchanged: {}",
        stored.text
    );
    app.finish().await;
}

/// Tokens of a tenant seeded already.
async fn setup_existing(app: &TestApp) -> crate::jobs::Setup {
    crate::jobs::Setup {
        admin: app.login("acme", "admin").await,
        member: app.login("acme", "member").await,
    }
}
