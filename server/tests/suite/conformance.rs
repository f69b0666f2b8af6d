//! What schemathesis found beyond crashes: bodies the schema forbids that were accepted, bodies
//! it allows that were refused, and a response that broke its own schema.

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(
    bodies_match_their_schema,
    nodes_and_profiles_stay_within_documented_ranges
);

async fn bodies_match_their_schema(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let group = app
        .post("/api/v1/groups", &admin, json!({"name": "ml"}))
        .await;
    let id = group.body["id"].as_str().unwrap().to_string();
    // An array is not an object, even if serde could read a struct out of it.
    for (path, body) in [
        (format!("/api/v1/groups/{id}"), json!([])),
        (format!("/api/v1/groups/{id}"), json!([null, null])),
        (format!("/api/v1/users/{id}"), json!([null, null])),
    ] {
        let r = app.patch(&path, &admin, body.clone()).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path} {body}: {}",
            r.text
        );
        assert_eq!(r.body["errors"][0]["field"], "body", "{}", r.text);
    }
    // `30.0` is an integer in JSON Schema (and in JavaScript).
    let r = app
        .post(
            "/api/v1/tokens",
            &admin,
            json!({"name": "ci", "expires_in_days": 30.0}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    // A fraction is not, and still names its field.
    let r = app
        .post(
            "/api/v1/tokens",
            &admin,
            json!({"name": "ci2", "expires_in_days": 30.5}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(r.body["errors"][0]["field"], "expires_in_days");
    // An empty cursor is no cursor (as an empty `from` is no bound).
    let r = app.get("/api/v1/audit?cursor=&from=&limit=5", &admin).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    app.finish().await;
}

async fn nodes_and_profiles_stay_within_documented_ranges(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let node = |extra: serde_json::Value| {
        let mut n = json!({"name": "n1", "gpus": 0, "gpu_model": "", "gpu_memory_mb": 0, "cpu_cores": 8, "memory_mb": 65536});
        for (k, v) in extra.as_object().unwrap() {
            n[k] = v.clone();
        }
        json!({"name": "p", "executor": "simulated", "nodes": [n]})
    };
    for extra in [
        // Without GPUs the GPU memory was not checked at all, and came back out of range.
        json!({"gpu_memory_mb": 1_048_577}),
        json!({"memory_mb": 9_223_372_036_854_775_808_u64}),
        json!({"memory_mb": 16_777_217}),
        json!({"cpu_cores": 4097}),
        json!({"cpu_cores": 4_294_967_295_u32}),
    ] {
        let r = app.post("/api/v1/pools", &admin, node(extra.clone())).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{extra}: {}",
            r.text
        );
        assert_eq!(r.body["errors"][0]["field"], "nodes", "{}", r.text);
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM pools").await, 0);
    // A fixed profile ignores min and max, but took any number for them.
    for field in ["min_gpu_milli", "max_gpu_milli"] {
        let r = app
            .post(
                "/api/v1/profiles",
                &admin,
                json!({"name": "fixed", "gpu_milli": 500, field: -1}),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
        assert_eq!(r.body["errors"][0]["field"], field, "{}", r.text);
    }
    let r = app
        .post(
            "/api/v1/pools",
            &admin,
            node(json!({"cpu_cores": 4096, "memory_mb": 16_777_216})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    app.finish().await;
}
