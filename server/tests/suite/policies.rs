//! Resource policies through the REST API: pools, profiles, policies and queues, with their
//! validation, permissions, tenant isolation and audit entries.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(
    admins_configure_pools_profiles_policies_and_queues,
    policies_are_tenant_scoped_and_validated
);

fn node(name: &str, gpus: u32) -> Value {
    json!({"name": name, "gpus": gpus, "gpu_model": "A100-80GB", "gpu_memory_mb": 81920, "cpu_cores": 64, "memory_mb": 524288})
}

async fn admins_configure_pools_profiles_policies_and_queues(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let group = app
        .post("/api/v1/groups", &admin, json!({"name": "research"}))
        .await;
    let group_id = group.body["id"].as_str().unwrap().to_string();

    let pool = app
        .post("/api/v1/pools", &admin, json!({"name": "a100", "executor": "simulated", "nodes": [node("n1", 8), node("n2", 8)], "gpu_hour_cost_cents": 250}))
        .await;
    assert_eq!(pool.status, StatusCode::CREATED, "{:?}", pool.body);
    let pool_id = pool.body["id"].as_str().unwrap().to_string();
    assert_eq!(pool.body["nodes"].as_array().unwrap().len(), 2);
    let spill = app
        .post(
            "/api/v1/pools",
            &admin,
            json!({"name": "spill", "executor": "simulated", "nodes": [node("s1", 4)]}),
        )
        .await;
    let spill_id = spill.body["id"].as_str().unwrap().to_string();

    // A member may look but not change.
    assert_eq!(
        app.get("/api/v1/pools", &member)
            .await
            .body
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let denied = app
        .post(
            "/api/v1/pools",
            &member,
            json!({"name": "mine", "executor": "simulated", "nodes": [node("m1", 1)]}),
        )
        .await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    // Only platform admins declare shared pools.
    let shared = app
        .post("/api/v1/pools", &admin, json!({"name": "shared", "executor": "simulated", "shared": true, "nodes": [node("x1", 1)]}))
        .await;
    assert_eq!(shared.status, StatusCode::FORBIDDEN);

    let profile = app
        .post(
            "/api/v1/profiles",
            &admin,
            json!({"name": "quarter", "gpu_milli": 250}),
        )
        .await;
    assert_eq!(profile.status, StatusCode::CREATED, "{:?}", profile.body);
    let dynamic = app
        .post(
            "/api/v1/profiles",
            &admin,
            json!({"name": "flex", "min_gpu_milli": 125, "max_gpu_milli": 4000}),
        )
        .await;
    assert_eq!(dynamic.body["gpu_milli"], 0);
    assert_eq!(dynamic.body["max_gpu_milli"], 4000);

    let policy = app
        .post("/api/v1/policies", &admin, json!({"group_id": group_id, "reservation_milli": 4000, "limit_milli": 12000, "over_quota_weight": 2}))
        .await;
    assert_eq!(policy.status, StatusCode::OK, "{:?}", policy.body);
    let policy_id = policy.body["id"].as_str().unwrap().to_string();
    // Setting it again replaces the values of the same policy.
    let again = app
        .post(
            "/api/v1/policies",
            &admin,
            json!({"group_id": group_id, "reservation_milli": 8000, "limit_milli": 16000}),
        )
        .await;
    assert_eq!(again.body["id"], policy_id.as_str());
    assert_eq!(again.body["reservation_milli"], 8000);
    assert_eq!(
        app.get("/api/v1/policies", &admin)
            .await
            .body
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let queue = app
        .post("/api/v1/queues", &admin, json!({"name": "train", "policy_id": policy_id, "profile_id": profile.body["id"], "pools": [pool_id, spill_id]}))
        .await;
    assert_eq!(queue.status, StatusCode::CREATED, "{:?}", queue.body);
    assert_eq!(queue.body["group_name"], "research");
    assert_eq!(
        queue.body["pools"],
        json!([pool_id, spill_id]),
        "spillover order is kept"
    );
    assert_eq!(
        queue.body["classes"].as_array().unwrap().len(),
        3,
        "default priority classes"
    );
    let qid = queue.body["id"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/api/v1/queues/{qid}"), &member)
            .await
            .status,
        StatusCode::OK
    );

    for action in [
        "pool.create",
        "profile.create",
        "policy.create",
        "policy.update",
        "queue.create",
    ] {
        let n = app
            .count(&format!(
                "SELECT COUNT(*) FROM audit_log WHERE action = '{action}'"
            ))
            .await;
        assert!(n >= 1, "audit entry {action}");
    }
    let update = app.get("/api/v1/audit?action=policy.update", &admin).await;
    assert_eq!(
        update.body["items"][0]["summary"]["from"]["reservation_milli"],
        4000
    );
    assert_eq!(
        update.body["items"][0]["summary"]["to"]["reservation_milli"],
        8000
    );
    app.finish().await;
}

async fn policies_are_tenant_scoped_and_validated(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("alpha").await;
    app.seed_tenant("beta").await;
    let root = app.seed_platform_admin().await;
    let a = app.login("alpha", "admin").await;
    let b = app.login("beta", "admin").await;
    let a_group = app
        .post("/api/v1/groups", &a, json!({"name": "team"}))
        .await
        .body["id"]
        .clone();

    let dedicated = app
        .post(
            "/api/v1/pools",
            &a,
            json!({"name": "alpha-only", "executor": "simulated", "nodes": [node("l1", 0)]}),
        )
        .await;
    assert_eq!(
        dedicated.status,
        StatusCode::CREATED,
        "{:?}",
        dedicated.body
    );
    let did = dedicated.body["id"].as_str().unwrap().to_string();
    let shared = app
        .post("/api/v1/pools", &root, json!({"name": "shared-h100", "executor": "simulated", "shared": true, "nodes": [node("h1", 8)]}))
        .await;
    assert_eq!(shared.status, StatusCode::CREATED, "{:?}", shared.body);
    // Beta sees the shared pool, never alpha's dedicated one.
    let names: Vec<String> = app
        .get("/api/v1/pools", &b)
        .await
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["shared-h100"]);
    assert_eq!(
        app.get(&format!("/api/v1/pools/{did}"), &b).await.status,
        StatusCode::NOT_FOUND
    );
    // Beta cannot attach alpha's group or alpha's pool.
    let bp = app
        .post(
            "/api/v1/profiles",
            &b,
            json!({"name": "one", "gpu_milli": 1000}),
        )
        .await;
    let r = app
        .post(
            "/api/v1/policies",
            &b,
            json!({"group_id": a_group, "reservation_milli": 1000, "limit_milli": 1000}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    let b_group = app
        .post("/api/v1/groups", &b, json!({"name": "team"}))
        .await
        .body["id"]
        .clone();
    let b_policy = app
        .post(
            "/api/v1/policies",
            &b,
            json!({"group_id": b_group, "reservation_milli": 1000, "limit_milli": 2000}),
        )
        .await;
    let r = app
        .post("/api/v1/queues", &b, json!({"name": "q", "policy_id": b_policy.body["id"], "profile_id": bp.body["id"], "pools": [did]}))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        r.body["errors"].to_string().contains("pools"),
        "{:?}",
        r.body
    );

    // Field errors.
    let bad = app
        .post(
            "/api/v1/pools",
            &a,
            json!({"name": "Bad Name", "executor": "k8s", "nodes": []}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let fields = bad.body["errors"].to_string();
    for f in ["name", "executor", "nodes"] {
        assert!(fields.contains(f), "{f} in {fields}");
    }
    let bad = app
        .post(
            "/api/v1/policies",
            &a,
            json!({"group_id": a_group, "reservation_milli": 3000, "limit_milli": 1000}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.body["errors"].to_string().contains("limit_milli"));
    let bad = app
        .post(
            "/api/v1/profiles",
            &a,
            json!({"name": "odd", "gpu_milli": 1500}),
        )
        .await;
    assert_eq!(
        bad.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "1.5 GPUs spans devices"
    );
    let dup = app
        .post(
            "/api/v1/pools",
            &a,
            json!({"name": "shared-h100", "executor": "simulated", "nodes": [node("z1", 1)]}),
        )
        .await;
    assert_eq!(
        dup.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        dup.body
    );
    let wrong = app
        .post(
            "/api/v1/pools",
            &a,
            json!({"name": "x", "executor": "simulated", "nodes": "many"}),
        )
        .await;
    assert!(wrong.status.is_client_error());
    // Nothing of beta was written by alpha's failures.
    assert_eq!(app.count("SELECT COUNT(*) FROM policies").await, 1);
    app.finish().await;
}
