//! Deleting an object something else still uses answers 409 saying what uses it (it was a 500
//! from the foreign key), changes nothing, and succeeds once the users are gone.

use axum::http::{header, Method, Request, StatusCode};
use axum::response::IntoResponse;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};

both_stores!(
    deleting_a_group_in_use_is_a_conflict,
    deleting_a_project_in_use_is_a_conflict,
    foreign_key_violations_are_conflicts
);

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

async fn created(app: &TestApp, token: &str, path: &str, body: Value) -> String {
    let r = app.post(path, token, body).await;
    assert!(r.status.is_success(), "{path}: {} {}", r.status, r.text);
    id(&r.body)
}

fn assert_conflict(r: &Resp, mentions: &str) {
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/problem+json");
    assert_eq!(r.body["type"], "https://switchyard.dev/problems/conflict");
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(mentions), "{mentions:?} in {detail:?}");
}

async fn deleting_a_group_in_use_is_a_conflict(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let group = created(&app, &admin, "/api/v1/groups", json!({"name": "ml"})).await;
    let member_id = app.user_id(&admin, "member").await;
    let added = app
        .post(
            &format!("/api/v1/groups/{group}/members"),
            &admin,
            json!({ "user_id": member_id }),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.text);
    let policy = created(&app, &admin, "/api/v1/policies", json!({"group_id": group, "reservation_milli": 1000, "limit_milli": 2000, "over_quota_weight": 1})).await;
    let path = format!("/api/v1/groups/{group}");
    assert_conflict(&app.delete(&path, &admin).await, "resource policy");
    // Nothing went: the group, its member, its policy.
    let kept = app.get(&path, &admin).await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.text);
    assert_eq!(kept.body["member_count"], 1, "{}", kept.text);
    assert_eq!(
        app.get(&format!("/api/v1/policies/{policy}"), &admin)
            .await
            .status,
        StatusCode::OK
    );
    // With a queue under the policy, the message says so too.
    let pool = created(&app, &admin, "/api/v1/pools", json!({"name": "p", "executor": "simulated", "nodes": [{"name": "n1", "gpus": 1, "gpu_model": "A100", "gpu_memory_mb": 81920, "cpu_cores": 8, "memory_mb": 65536}]})).await;
    let profile = created(
        &app,
        &admin,
        "/api/v1/profiles",
        json!({"name": "one", "gpu_milli": 1000}),
    )
    .await;
    created(
        &app,
        &admin,
        "/api/v1/queues",
        json!({"name": "q", "policy_id": policy, "profile_id": profile, "pools": [pool]}),
    )
    .await;
    assert_conflict(&app.delete(&path, &admin).await, "1 queue");
    // SCIM says the same, in its own error format.
    let scim_token = app.post("/api/v1/scim/token", &admin, json!({})).await.body["token"]
        .as_str()
        .unwrap()
        .to_string();
    let scim = app
        .raw(
            Request::builder()
                .method(Method::DELETE)
                .uri(format!("/scim/v2/Groups/{group}"))
                .header(header::AUTHORIZATION, format!("Bearer {scim_token}"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(scim.status, StatusCode::CONFLICT, "{}", scim.text);
    assert!(scim.body["detail"]
        .as_str()
        .unwrap_or_default()
        .contains("resource policy"));
    assert_eq!(app.get(&path, &admin).await.status, StatusCode::OK);
    // A group nothing uses (its access rules go with it) is deleted.
    let free = created(&app, &admin, "/api/v1/groups", json!({"name": "free"})).await;
    created(
        &app,
        &admin,
        "/api/v1/access-rules",
        json!({"group_id": free, "permission": "view", "resource_kind": "model"}),
    )
    .await;
    let gone = app.delete(&format!("/api/v1/groups/{free}"), &admin).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.text);
    app.finish().await;
}

async fn deleting_a_project_in_use_is_a_conflict(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let research = created(
        &app,
        &admin,
        "/api/v1/projects",
        json!({"name": "research"}),
    )
    .await;
    let path = format!("/api/v1/projects/{research}");
    let model = created(
        &app,
        &admin,
        "/api/v1/models",
        json!({"project_id": research, "name": "detector", "location_uri": "s3://models/detector"}),
    )
    .await;
    assert_conflict(&app.delete(&path, &admin).await, "1 model");
    let dataset = created(
        &app,
        &admin,
        "/api/v1/datasets",
        json!({"project_id": research, "name": "images", "location_uri": "s3://data/images"}),
    )
    .await;
    assert_conflict(&app.delete(&path, &admin).await, "1 dataset");
    let child = created(
        &app,
        &admin,
        "/api/v1/projects",
        json!({"name": "vision", "parent_id": research}),
    )
    .await;
    let r = app.delete(&path, &admin).await;
    assert_conflict(&r, "1 sub-project, 1 model, 1 dataset");
    assert_eq!(app.get(&path, &admin).await.status, StatusCode::OK);
    // Once they are gone, the project goes (with the access rules scoped to it).
    for gone in [
        format!("/api/v1/models/{model}"),
        format!("/api/v1/datasets/{dataset}"),
        format!("/api/v1/projects/{child}"),
    ] {
        let r = app.delete(&gone, &admin).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{gone}: {}", r.text);
    }
    let group = created(&app, &admin, "/api/v1/groups", json!({"name": "team"})).await;
    created(&app, &admin, "/api/v1/access-rules", json!({"group_id": group, "permission": "view", "resource_kind": "model", "project_id": research})).await;
    let r = app.delete(&path, &admin).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    app.finish().await;
}

/// The safety net: a foreign-key violation no delete checked for is a 409, not a 500.
async fn foreign_key_violations_are_conflicts(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let project = created(&app, &admin, "/api/v1/projects", json!({"name": "p"})).await;
    created(
        &app,
        &admin,
        "/api/v1/models",
        json!({"project_id": project, "name": "m", "location_uri": "s3://m"}),
    )
    .await;
    let err = sqlx::query("DELETE FROM projects WHERE id = $1")
        .bind(&project)
        .execute(&app.store().pool)
        .await
        .unwrap_err();
    let resp = switchyard::http::error::ApiError::from(err).into_response();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(
        resp.headers()[header::CONTENT_TYPE],
        "application/problem+json"
    );
    app.finish().await;
}
