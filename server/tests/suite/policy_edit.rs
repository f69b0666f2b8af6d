//! Changing and deleting pools, profiles, queues and policies: each change is what the next
//! read shows and what the scheduler does next, each delete removes, what is still in use
//! answers 409 saying why, members get 403 and other tenants 404, and every write has its
//! audit entry.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{group_queue, id, node, pool, profile, setup, submit, wait_state, Setup};

// What the scheduler does after a change.
mod scheduling;

both_stores!(
    edits_show_in_the_next_read_and_deletes_remove,
    what_is_in_use_is_not_deleted,
    members_get_403_other_tenants_404_and_shared_pools_are_the_platform_admins
);

/// The audit entries of `action` (newest first).
async fn audit(app: &TestApp, token: &str, action: &str) -> Vec<Value> {
    let r = app
        .get(&format!("/api/v1/audit?action={action}"), token)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body["items"].as_array().unwrap().clone()
}

fn assert_status(r: &crate::common::Resp, status: StatusCode, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.text);
}

/// A pool of one 2-GPU node, a flexible profile, and the vision group's policy (1 GPU
/// reserved, `limit` at most) with a queue on the pool: (pool, profile, policy, queue).
async fn objects(app: &TestApp, s: &Setup, limit: i64) -> (String, String, String, String) {
    let p = pool(app, s, "small", "simulated", json!([node("a1", 2)])).await;
    let flex = profile(
        app,
        s,
        json!({"name": "flex", "min_gpu_milli": 125, "max_gpu_milli": 2000}),
    )
    .await;
    let q = group_queue(
        app,
        s,
        "vision",
        json!({"reservation_milli": 1000, "limit_milli": limit, "over_quota_weight": 1}),
        &flex,
        &[&p],
        true,
    )
    .await;
    let queue = app.get(&format!("/api/v1/queues/{q}"), &s.admin).await;
    let policy = queue.body["policy_id"].as_str().unwrap().to_string();
    (p, flex, policy, q)
}

async fn edits_show_in_the_next_read_and_deletes_remove(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let (p, flex, policy, q) = objects(&app, &s, 2000).await;
    let spare = pool(&app, &s, "spare", "simulated", json!([node("b1", 4)])).await;

    // A pool: renamed, a node added, another price.
    let r = app
        .patch(
            &format!("/api/v1/pools/{p}"),
            &s.admin,
            json!({"name": "Small-2", "nodes": [node("a1", 2), node("a2", 4)], "gpu_hour_cost_cents": 250}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "pool edit");
    let read = app.get(&format!("/api/v1/pools/{p}"), &s.admin).await;
    assert_eq!(read.body["name"], "small-2");
    assert_eq!(read.body["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(read.body["gpu_hour_cost_cents"], 250);
    assert_eq!(
        read.body["executor"], "simulated",
        "what was not sent stays"
    );
    // Another pool's name is taken; a node list that is not valid is refused at its field.
    let r = app
        .patch(
            &format!("/api/v1/pools/{p}"),
            &s.admin,
            json!({"name": "spare"}),
        )
        .await;
    assert_status(&r, StatusCode::UNPROCESSABLE_ENTITY, "taken name");
    assert_eq!(r.body["errors"][0]["field"], "name");
    let r = app
        .patch(
            &format!("/api/v1/pools/{p}"),
            &s.admin,
            json!({"nodes": []}),
        )
        .await;
    assert_status(&r, StatusCode::UNPROCESSABLE_ENTITY, "no nodes");
    assert_eq!(r.body["errors"][0]["field"], "nodes");
    let r = app
        .patch(
            &format!("/api/v1/pools/{p}"),
            &s.admin,
            json!({"shared": true}),
        )
        .await;
    assert_status(
        &r,
        StatusCode::UNPROCESSABLE_ENTITY,
        "shared is not changed",
    );

    // A profile: from a range to a fixed amount, and back with a range.
    let r = app
        .patch(
            &format!("/api/v1/profiles/{flex}"),
            &s.admin,
            json!({"name": "half", "gpu_milli": 500}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "profile edit");
    let read = app.get(&format!("/api/v1/profiles/{flex}"), &s.admin).await;
    assert_eq!(read.body["name"], "half");
    assert_eq!(read.body["gpu_milli"], 500);
    assert_eq!(read.body["min_gpu_milli"], 500);
    let r = app
        .patch(
            &format!("/api/v1/profiles/{flex}"),
            &s.admin,
            json!({"gpu_milli": 0, "min_gpu_milli": 250, "max_gpu_milli": 125}),
        )
        .await;
    assert_status(&r, StatusCode::UNPROCESSABLE_ENTITY, "min above max");
    assert_eq!(r.body["errors"][0]["field"], "max_gpu_milli");

    // A queue: name, pools in a new order, classes, minimum runtime; then back to the default.
    let r = app
        .patch(
            &format!("/api/v1/queues/{q}"),
            &s.admin,
            json!({"name": "vision-fast", "pools": [spare, p], "over_quota": false,
                   "classes": [{"name": "urgent", "priority": 200, "preemptible": false}, {"name": "normal", "priority": 50, "preemptible": true}],
                   "min_runtime_ms": 60000}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "queue edit");
    let read = app.get(&format!("/api/v1/queues/{q}"), &s.admin).await;
    assert_eq!(read.body["name"], "vision-fast");
    assert_eq!(read.body["pools"], json!([spare, p]));
    assert_eq!(read.body["over_quota"], false);
    assert_eq!(read.body["classes"][0]["name"], "urgent");
    assert_eq!(read.body["min_runtime_ms"], 60000);
    assert_eq!(read.body["profile_name"], "half", "the profile stays");
    let r = app
        .patch(
            &format!("/api/v1/queues/{q}"),
            &s.admin,
            json!({"min_runtime_ms": null}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "queue runtime reset");
    assert_eq!(r.body["min_runtime_ms"], Value::Null);
    assert_eq!(r.body["name"], "vision-fast");
    // Its group is not changed here, and a pool twice is refused.
    let r = app
        .patch(
            &format!("/api/v1/queues/{q}"),
            &s.admin,
            json!({"policy_id": policy}),
        )
        .await;
    assert_status(
        &r,
        StatusCode::UNPROCESSABLE_ENTITY,
        "policy_id is not a queue edit",
    );
    let r = app
        .patch(
            &format!("/api/v1/queues/{q}"),
            &s.admin,
            json!({"pools": [p, p]}),
        )
        .await;
    assert_status(&r, StatusCode::UNPROCESSABLE_ENTITY, "a pool twice");
    assert_eq!(r.body["errors"][0]["field"], "pools");

    // A policy's per-pool quotas are set through POST /policies, and read back.
    let group = app
        .get(&format!("/api/v1/policies/{policy}"), &s.admin)
        .await
        .body["group_id"]
        .clone();
    let r = app
        .post(
            "/api/v1/policies",
            &s.admin,
            json!({"group_id": group, "reservation_milli": 1000, "limit_milli": 3000,
                   "pools": [{"pool_id": p, "reservation_milli": 500, "limit_milli": 1000}]}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "policy edit");
    let read = app
        .get(&format!("/api/v1/policies/{policy}"), &s.admin)
        .await;
    assert_eq!(read.body["limit_milli"], 3000);
    assert_eq!(read.body["pools"][0]["pool_name"], "small-2");
    assert_eq!(read.body["pools"][0]["limit_milli"], 1000);

    // Deletes, in the order their users allow: the queue, then its policy, profile and pools.
    for path in [
        format!("/api/v1/queues/{q}"),
        format!("/api/v1/policies/{policy}"),
        format!("/api/v1/profiles/{flex}"),
        format!("/api/v1/pools/{p}"),
        format!("/api/v1/pools/{spare}"),
    ] {
        let r = app.delete(&path, &s.admin).await;
        assert_status(&r, StatusCode::NO_CONTENT, &path);
        let again = app.get(&path, &s.admin).await;
        assert_status(
            &again,
            StatusCode::NOT_FOUND,
            &format!("{path} after delete"),
        );
        let twice = app.delete(&path, &s.admin).await;
        assert_status(
            &twice,
            StatusCode::NOT_FOUND,
            &format!("{path} deleted twice"),
        );
    }
    assert_eq!(
        app.count("SELECT COUNT(*) FROM policy_pools").await,
        0,
        "the per-pool quotas went with their policy"
    );
    let pools = app.get("/api/v1/pools", &s.admin).await;
    assert_eq!(pools.body, json!([]));

    // One audit entry per write, with what changed.
    for (action, n) in [
        ("pool.update", 1),
        ("profile.update", 1),
        ("queue.update", 2),
        ("policy.update", 1),
        ("queue.delete", 1),
        ("policy.delete", 1),
        ("profile.delete", 1),
        ("pool.delete", 2),
    ] {
        let entries = audit(&app, &s.admin, action).await;
        assert_eq!(entries.len(), n, "{action}: {entries:?}");
    }
    let pool_update = &audit(&app, &s.admin, "pool.update").await[0];
    assert_eq!(pool_update["target_id"], p.as_str());
    assert_eq!(pool_update["summary"]["from"]["name"], "small");
    assert_eq!(pool_update["summary"]["to"]["name"], "small-2");
    assert_eq!(pool_update["summary"]["to"]["gpus"], 6);
    let queue_update = &audit(&app, &s.admin, "queue.update").await[1];
    assert_eq!(queue_update["summary"]["from"]["name"], "vision-q");
    assert_eq!(
        queue_update["summary"]["to"]["pools"],
        json!(["spare", "small-2"])
    );
    app.finish().await;
}

async fn what_is_in_use_is_not_deleted(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let (p, flex, policy, q) = objects(&app, &s, 2000).await;
    let conflict = |r: &crate::common::Resp, what: &str, words: &[&str]| {
        assert_status(r, StatusCode::CONFLICT, what);
        assert_eq!(
            r.headers["content-type"], "application/problem+json",
            "{what}"
        );
        let detail = r.body["detail"].as_str().unwrap_or_default();
        for w in words {
            assert!(detail.contains(w), "{what}: {detail:?} lacks {w:?}");
        }
    };
    let r = app.delete(&format!("/api/v1/pools/{p}"), &s.admin).await;
    conflict(&r, "pool under a queue", &["queue vision-q uses it"]);
    let r = app
        .delete(&format!("/api/v1/profiles/{flex}"), &s.admin)
        .await;
    conflict(&r, "profile of a queue", &["queue vision-q uses it"]);
    let r = app
        .delete(&format!("/api/v1/policies/{policy}"), &s.admin)
        .await;
    conflict(&r, "policy of a queue", &["queue vision-q is under it"]);

    // A running job keeps its queue and its pool.
    let job = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "train", "command": "train", "gpu_milli": 1000, "duration_ms": 600000}),
    )
    .await;
    wait_state(&app, &s.member, &job, "running").await;
    let r = app.delete(&format!("/api/v1/queues/{q}"), &s.admin).await;
    conflict(&r, "queue with a live job", &["1 live job"]);
    // Taken out of the queue, the pool still runs the job.
    let other = pool(&app, &s, "other", "simulated", json!([node("c1", 2)])).await;
    let r = app
        .patch(
            &format!("/api/v1/queues/{q}"),
            &s.admin,
            json!({"pools": [other]}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "queue moved");
    let r = app.delete(&format!("/api/v1/pools/{p}"), &s.admin).await;
    conflict(&r, "pool running a job", &["1 job runs on it"]);

    // Once the job has ended, the queue still keeps its history.
    let r = app
        .post(&format!("/api/v1/jobs/{job}/abort"), &s.member, json!({}))
        .await;
    assert!(r.status.is_success(), "{}", r.text);
    wait_state(&app, &s.member, &job, "aborted").await;
    let r = app.delete(&format!("/api/v1/queues/{q}"), &s.admin).await;
    conflict(&r, "queue with history", &["1 finished job"]);
    // The pool has nothing left on it.
    let r = app.delete(&format!("/api/v1/pools/{p}"), &s.admin).await;
    assert_status(&r, StatusCode::NO_CONTENT, "pool free");
    // Nothing refused was written.
    assert!(audit(&app, &s.admin, "queue.delete").await.is_empty());
    assert!(audit(&app, &s.admin, "profile.delete").await.is_empty());
    assert_eq!(audit(&app, &s.admin, "pool.delete").await.len(), 1);
    app.finish().await;
}

async fn members_get_403_other_tenants_404_and_shared_pools_are_the_platform_admins(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let other = setup(&app, "globex").await;
    let root = app.seed_platform_admin().await;
    let (p, flex, policy, q) = objects(&app, &s, 2000).await;
    let paths = [
        (
            format!("/api/v1/pools/{p}"),
            json!({"gpu_hour_cost_cents": 1}),
        ),
        (format!("/api/v1/profiles/{flex}"), json!({"name": "x"})),
        (format!("/api/v1/queues/{q}"), json!({"name": "x"})),
    ];
    for (path, body) in &paths {
        let r = app.patch(path, &s.member, body.clone()).await;
        assert_status(&r, StatusCode::FORBIDDEN, &format!("member PATCH {path}"));
        let r = app.delete(path, &s.member).await;
        assert_status(&r, StatusCode::FORBIDDEN, &format!("member DELETE {path}"));
        let r = app.patch(path, &other.admin, body.clone()).await;
        assert_status(
            &r,
            StatusCode::NOT_FOUND,
            &format!("other tenant PATCH {path}"),
        );
        let r = app.delete(path, &other.admin).await;
        assert_status(
            &r,
            StatusCode::NOT_FOUND,
            &format!("other tenant DELETE {path}"),
        );
    }
    let path = format!("/api/v1/policies/{policy}");
    assert_status(
        &app.delete(&path, &s.member).await,
        StatusCode::FORBIDDEN,
        "member policy",
    );
    assert_status(
        &app.delete(&path, &other.admin).await,
        StatusCode::NOT_FOUND,
        "other policy",
    );
    // Nothing changed.
    let read = app.get(&format!("/api/v1/queues/{q}"), &s.admin).await;
    assert_eq!(read.body["name"], "vision-q");

    // A shared pool: every tenant sees it, only a platform admin changes or deletes it.
    let shared = app
        .post(
            "/api/v1/pools",
            &root,
            json!({"name": "shared", "executor": "simulated", "nodes": [node("s1", 8)], "shared": true}),
        )
        .await;
    assert_status(&shared, StatusCode::CREATED, "shared pool");
    let sp = id(&shared.body);
    let path = format!("/api/v1/pools/{sp}");
    assert_status(
        &app.get(&path, &s.admin).await,
        StatusCode::OK,
        "a tenant sees it",
    );
    let r = app.patch(&path, &s.admin, json!({"name": "mine"})).await;
    assert_status(
        &r,
        StatusCode::FORBIDDEN,
        "tenant admin edits a shared pool",
    );
    assert_status(
        &app.delete(&path, &s.admin).await,
        StatusCode::FORBIDDEN,
        "tenant admin deletes it",
    );
    // Shrinking it below what is granted to tenants is refused.
    let r = app
        .call(
            axum::http::Method::PUT,
            &format!(
                "/api/v1/pools/{sp}/grants/{}",
                tenant_id(&app, "acme").await
            ),
            Some(&root),
            Some(json!({"reservation_milli": 6000})),
        )
        .await;
    assert_status(&r, StatusCode::OK, "grant");
    let r = app
        .patch(&path, &root, json!({"nodes": [node("s1", 4)]}))
        .await;
    assert_status(&r, StatusCode::CONFLICT, "below the grants");
    assert!(
        r.body["detail"].as_str().unwrap().contains("grants"),
        "{}",
        r.text
    );
    let r = app
        .patch(
            &path,
            &root,
            json!({"name": "shared-h100", "nodes": [node("s1", 8), node("s2", 8)]}),
        )
        .await;
    assert_status(&r, StatusCode::OK, "platform admin edits");
    assert_eq!(audit(&app, &root, "pool.update").await.len(), 1);
    assert_status(
        &app.delete(&path, &root).await,
        StatusCode::NO_CONTENT,
        "platform admin deletes",
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM pool_grants").await,
        0,
        "its grants went with it"
    );
    app.finish().await;
}

/// A tenant's id by its slug.
async fn tenant_id(app: &TestApp, slug: &str) -> String {
    sqlx::query_scalar("SELECT id FROM tenants WHERE slug = $1")
        .bind(slug)
        .fetch_one(&app.store().pool)
        .await
        .unwrap()
}
