//! Submitting: a batch is stored whole or not at all, and a retried request with its
//! `Idempotency-Key` creates nothing new.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{group_queue, job, node, pool, profile, setup, small_queue, states, wait_state};

both_stores!(
    a_batch_is_stored_whole_or_not_at_all,
    a_retried_submit_with_its_key_creates_nothing,
    concurrent_submits_committed_together_keep_caps_and_keys,
    a_submit_sees_the_queue_profile_and_pools_as_just_changed,
    group_commits_between_other_writes_of_the_chain_keep_every_job_once
);

/// Submits remember a queue's profile and pools between requests (store/config_cache.rs): a
/// change through the API is what the very next submit gets, and a removed member is refused
/// on the next one.
async fn a_submit_sees_the_queue_profile_and_pools_as_just_changed(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let body = json!({"queue_id": q, "name": "j", "command": "true"});
    let gpus = |v: &Value| v["gpu_milli"].as_i64();
    let first = app.post("/api/v1/jobs", &s.member, body.clone()).await;
    assert_eq!(
        gpus(&first.body),
        Some(125),
        "the flexible profile's minimum: {}",
        first.text
    );
    // The profile's minimum goes up: the next job gets it.
    let queue = app.get(&format!("/api/v1/queues/{q}"), &s.admin).await;
    let profile_id = queue.body["profile_id"].as_str().unwrap().to_string();
    let r = app
        .patch(
            &format!("/api/v1/profiles/{profile_id}"),
            &s.admin,
            json!({"min_gpu_milli": 500}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let second = app.post("/api/v1/jobs", &s.member, body.clone()).await;
    assert_eq!(gpus(&second.body), Some(500), "{}", second.text);
    // The queue moves to a fixed 1-GPU profile: the next job gets one GPU.
    let fixed = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let r = app
        .patch(
            &format!("/api/v1/queues/{q}"),
            &s.admin,
            json!({"profile_id": fixed}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let third = app.post("/api/v1/jobs", &s.member, body.clone()).await;
    assert_eq!(gpus(&third.body), Some(1000), "{}", third.text);
    // A pool of one 1-GPU node only: a 2-GPU job no longer fits anywhere.
    let small = pool(&app, &s, "tiny", "simulated", json!([node("t1", 1)])).await;
    let flex = profile(
        &app,
        &s,
        json!({"name": "flex2", "min_gpu_milli": 125, "max_gpu_milli": 2000}),
    )
    .await;
    let r = app
        .patch(
            &format!("/api/v1/queues/{q}"),
            &s.admin,
            json!({"profile_id": flex, "pools": [small]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let two = json!({"queue_id": q, "name": "big", "command": "true", "gpu_milli": 2000});
    let r = app.post("/api/v1/jobs", &s.member, two).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    // The member leaves the queue's group: the next submit is refused.
    let member_id = app.user_id(&s.admin, "member").await;
    let group = queue.body["group_id"].as_str().unwrap().to_string();
    let r = app
        .delete(
            &format!("/api/v1/groups/{group}/members/{member_id}"),
            &s.admin,
        )
        .await;
    assert!(r.status.is_success(), "{}", r.text);
    let r = app.post("/api/v1/jobs", &s.member, body).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(r.body["errors"][0]["field"], "queue_id", "{}", r.text);
    app.finish().await;
}

/// `POST` with `Idempotency-Key` through the router, as a client retrying would send it.
/// One number the store answers.
async fn count(app: &TestApp, sql: impl AsRef<str>) -> i64 {
    sqlx::query_scalar::<_, i64>(sql.as_ref())
        .fetch_one(&app.state.store.pool)
        .await
        .unwrap()
}

async fn submit_with_key(
    app: &TestApp,
    token: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> crate::common::Resp {
    app.raw(
        axum::http::Request::post(path)
            .header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .header("idempotency-key", key)
            .body(axum::body::Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

async fn a_retried_submit_with_its_key_creates_nothing(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let body = json!({"queue_id": q, "name": "train", "command": "train.py", "gpu_milli": 1000, "duration_ms": 60000});

    // A retry (or a double click) with the same key and body: the same job, nothing new.
    let first = submit_with_key(&app, &s.member, "/api/v1/jobs", "k-1", &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let again = submit_with_key(&app, &s.member, "/api/v1/jobs", "k-1", &body).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.text);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.body["id"], first.body["id"]);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 1);

    // The same key with another body is refused, naming the header.
    let mut other = body.clone();
    other["name"] = json!("other");
    let clash = submit_with_key(&app, &s.member, "/api/v1/jobs", "k-1", &other).await;
    assert_eq!(
        clash.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        clash.text
    );
    assert_eq!(
        clash.body["errors"][0]["field"], "Idempotency-Key",
        "{}",
        clash.text
    );
    // Keys are per user: another user's "k-1" is a new submit.
    let by_admin = submit_with_key(&app, &s.admin, "/api/v1/jobs", "k-1", &body).await;
    assert_eq!(by_admin.status, StatusCode::CREATED, "{}", by_admin.text);
    assert!(by_admin.headers.get("idempotent-replayed").is_none());
    assert_ne!(by_admin.body["id"], first.body["id"]);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 2);
    // A bad key is a 422, not a silent submit without one.
    let bad = submit_with_key(&app, &s.member, "/api/v1/jobs", "has space", &body).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 2);

    // Eight concurrent requests with one key: one job.
    let concurrent = futures::future::join_all(
        (0..8).map(|_| submit_with_key(&app, &s.member, "/api/v1/jobs", "k-race", &body)),
    )
    .await;
    let ids: std::collections::BTreeSet<String> = concurrent
        .iter()
        .map(|r| {
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
            r.body["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 1, "one job for one key");
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 3);

    // Batches too: the replay answers with the same jobs in the same order.
    let batch = json!({"jobs": [body.clone(), other.clone()]});
    let b1 = submit_with_key(&app, &s.member, "/api/v1/jobs/batch", "b-1", &batch).await;
    assert_eq!(b1.status, StatusCode::CREATED, "{}", b1.text);
    let b2 = submit_with_key(&app, &s.member, "/api/v1/jobs/batch", "b-1", &batch).await;
    assert_eq!(b2.headers["idempotent-replayed"], "true");
    assert_eq!(b1.body["jobs"], b2.body["jobs"]);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 5);
    // One audit entry per job created, none for replays.
    let audit = app.get("/api/v1/audit?action=job.submit", &s.admin).await;
    assert_eq!(audit.body["items"].as_array().unwrap().len(), 5);
    app.finish().await;
}

async fn a_batch_is_stored_whole_or_not_at_all(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let p = pool(
        &app,
        &s,
        "small",
        "simulated",
        json!([node("a1", 2), node("a2", 2)]),
    )
    .await;
    let flex = profile(
        &app,
        &s,
        json!({"name": "flex", "min_gpu_milli": 125, "max_gpu_milli": 4000}),
    )
    .await;
    let q = group_queue(
        &app,
        &s,
        "vision",
        json!({"reservation_milli": 4000, "limit_milli": 4000, "over_quota_weight": 1}),
        &flex,
        &[&p],
        true,
    )
    .await;
    let spec = |name: &str, milli: i64| json!({"queue_id": q, "name": name, "command": "train.py", "gpu_milli": milli, "duration_ms": 600000});
    let mut urgent = spec("c", 1000);
    urgent["priority_class"] = json!("urgent");
    let bad = app
        .post(
            "/api/v1/jobs/batch",
            &s.member,
            json!({"jobs": [spec("a", 1000), spec("b", 3000), urgent]}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let fields: Vec<&str> = bad.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["jobs[1].gpu_milli", "jobs[2].priority_class"]);
    assert!(
        bad.text.contains("multi-node jobs are not supported"),
        "{}",
        bad.text
    );
    let none = app.get("/api/v1/jobs", &s.member).await;
    assert_eq!(
        none.body["items"].as_array().unwrap().len(),
        0,
        "a rejected batch stores nothing"
    );
    let empty = app
        .post("/api/v1/jobs/batch", &s.member, json!({"jobs": []}))
        .await;
    assert_eq!(empty.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(empty.body["errors"][0]["field"], "jobs");

    let ok = app
        .post(
            "/api/v1/jobs/batch",
            &s.member,
            json!({"jobs": [spec("a", 1000), spec("b", 2000), spec("c", 500)]}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.text);
    let jobs = ok.body["jobs"].as_array().unwrap();
    let names: Vec<&str> = jobs.iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b", "c"], "in the order sent");
    for j in jobs {
        assert_eq!(j["state"], "queued");
        assert_eq!(j["username"], "member");
        wait_state(&app, &s.member, j["id"].as_str().unwrap(), "running").await;
    }
    let b = job(&app, &s.member, jobs[1]["id"].as_str().unwrap()).await;
    assert_eq!(
        b["job"]["slices"].as_array().unwrap().len(),
        2,
        "two whole GPUs on one node"
    );
    assert_eq!(states(&b)[0], "queued");
    let audit = app.get("/api/v1/audit?action=job.submit", &s.admin).await;
    let entries = audit.body["items"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "one audit entry per job");
    assert!(entries.iter().all(|e| e["actor_name"] == "member"));
    app.assert_audit_intact("the batched entries keep the chain intact")
        .await;
    app.finish().await;
}

/// Concurrent single submits are written together (group commit); each is still checked
/// against its cap and its key as if it had been alone, and one refused does not fail the
/// others.
async fn concurrent_submits_committed_together_keep_caps_and_keys(kind: Kind) {
    let config = switchyard::config::Config {
        max_pending_per_user: 10,
        ..crate::common::test_config()
    };
    let app = TestApp::with_config(kind, config).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let body = |name: String| json!({"queue_id": q, "name": name, "command": "train.py", "gpu_milli": 1000, "duration_ms": 60000});

    // 32 at once against a cap of 10 waiting jobs per user: exactly 10 stored.
    let answers = futures::future::join_all(
        (0..32).map(|i| app.post("/api/v1/jobs", &s.member, body(format!("j{i}")))),
    )
    .await;
    let mut created = Vec::new();
    for r in &answers {
        match r.status {
            StatusCode::CREATED => created.push(r.body["id"].as_str().unwrap().to_string()),
            StatusCode::CONFLICT => {
                assert_eq!(
                    r.headers[axum::http::header::CONTENT_TYPE],
                    "application/problem+json",
                    "{}",
                    r.text
                );
                assert!(
                    r.text.contains("at most 10 may wait per user"),
                    "{}",
                    r.text
                );
            }
            other => panic!("{other}: {}", r.text),
        }
    }
    assert_eq!(created.len(), 10, "the cap holds within a group commit");
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 10);
    // Each stored job has its first event and its audit entry; nothing of the refused ones.
    let list = created
        .iter()
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let events = count(&app, format!("SELECT COUNT(*) FROM job_events WHERE to_state = 'queued' AND from_state IS NULL AND job_id IN ({list})")).await;
    assert_eq!(events, 10);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM job_events").await, 10);
    let audited = count(
        &app,
        format!(
            "SELECT COUNT(*) FROM audit_log WHERE action = 'job.submit' AND target_id IN ({list})"
        ),
    )
    .await;
    assert_eq!(audited, 10);
    assert_eq!(
        count(
            &app,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'job.submit'"
        )
        .await,
        10
    );

    // A refused submit leaves its key unused: the retry is checked again, not replayed.
    for _ in 0..2 {
        let r = submit_with_key(&app, &s.member, "/api/v1/jobs", "m-1", &body("m".into())).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    }

    // Twelve at once with one key and four without: one job for the key, the others replay
    // it; the keyless ones are stored beside it.
    let keyed = body("keyed".into());
    let (with_key, without) = futures::future::join(
        futures::future::join_all(
            (0..12).map(|_| submit_with_key(&app, &s.admin, "/api/v1/jobs", "k-1", &keyed)),
        ),
        futures::future::join_all(
            (0..4).map(|i| app.post("/api/v1/jobs", &s.admin, body(format!("a{i}")))),
        ),
    )
    .await;
    let ids: std::collections::BTreeSet<&str> = with_key
        .iter()
        .map(|r| {
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
            r.body["id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(ids.len(), 1, "one job for one key");
    let fresh = with_key
        .iter()
        .filter(|r| r.headers.get("idempotent-replayed").is_none())
        .count();
    assert_eq!(fresh, 1, "the others are replays");
    assert!(without.iter().all(|r| r.status == StatusCode::CREATED));
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 15);
    // The key with another body at the same time as a retry: the retry replays, the other
    // body is refused, nothing new is stored.
    let mut other = keyed.clone();
    other["name"] = json!("other");
    let (retry, clash) = futures::future::join(
        submit_with_key(&app, &s.admin, "/api/v1/jobs", "k-1", &keyed),
        submit_with_key(&app, &s.admin, "/api/v1/jobs", "k-1", &other),
    )
    .await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
    assert_eq!(retry.headers["idempotent-replayed"], "true");
    assert_eq!(
        clash.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        clash.text
    );
    assert_eq!(clash.body["errors"][0]["field"], "Idempotency-Key");
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 15);
    assert_eq!(
        count(
            &app,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'job.submit'"
        )
        .await,
        15
    );
    app.assert_audit_intact("concurrent submits keep the chain intact")
        .await;
    app.finish().await;
}

/// Waves of concurrent single submits (group commits) with other writes of the tenant's `api`
/// audit chain between them: every job is stored once, with its event and its entry, and the
/// chain stays intact.
async fn group_commits_between_other_writes_of_the_chain_keep_every_job_once(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let body = |name: String| json!({"queue_id": q, "name": name, "command": "train.py"});
    let groups_before = count(
        &app,
        "SELECT COUNT(*) FROM audit_log WHERE action = 'group.create'",
    )
    .await;
    let mut created = std::collections::BTreeSet::new();
    for wave in 0..4 {
        let answers = futures::future::join_all(
            (0..24).map(|i| app.post("/api/v1/jobs", &s.member, body(format!("w{wave}-{i}")))),
        )
        .await;
        for r in &answers {
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
            assert!(created.insert(r.body["id"].as_str().unwrap().to_string()));
        }
        // Another write of the same chain: the next wave's first group finds the head moved.
        let g = app
            .post(
                "/api/v1/groups",
                &s.admin,
                json!({"name": format!("other-{wave}")}),
            )
            .await;
        assert_eq!(g.status, StatusCode::CREATED, "{}", g.text);
    }
    assert_eq!(created.len(), 96);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM jobs").await, 96);
    assert_eq!(
        count(&app, "SELECT COUNT(DISTINCT job_id) FROM job_events WHERE from_state IS NULL AND to_state = 'queued'").await,
        96
    );
    assert_eq!(count(&app, "SELECT COUNT(*) FROM job_events").await, 96);
    assert_eq!(
        count(
            &app,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'job.submit'"
        )
        .await,
        96
    );
    assert_eq!(
        count(
            &app,
            "SELECT COUNT(DISTINCT target_id) FROM audit_log WHERE action = 'job.submit'"
        )
        .await,
        96
    );
    assert_eq!(
        count(
            &app,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'group.create'"
        )
        .await,
        groups_before + 4
    );
    app.assert_audit_intact("group commits between other writes keep the chain intact")
        .await;
    app.finish().await;
}
