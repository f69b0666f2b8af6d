//! Tenant isolation: tenant A's admin against every tenant B resource answers 404 (or 403), and
//! nothing of B changes.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(tenant_a_cannot_see_or_touch_tenant_b);

async fn snapshot(app: &TestApp, tenant_id: &str) -> Vec<String> {
    let mut out = Vec::new();
    for sql in [
        "SELECT id || username || display_name || disabled || is_tenant_admin FROM users WHERE tenant_id = $1 ORDER BY id",
        "SELECT id || name || description FROM groups WHERE tenant_id = $1 ORDER BY id",
        "SELECT group_id || user_id FROM memberships WHERE tenant_id = $1 ORDER BY group_id, user_id",
        "SELECT id || name || description FROM projects WHERE tenant_id = $1 ORDER BY id",
        "SELECT id || COALESCE(revoked_at, 0) FROM api_tokens WHERE tenant_id = $1 ORDER BY id",
        "SELECT chain || seq || hash FROM audit_heads WHERE tenant_id = $1 ORDER BY chain",
    ] {
        let rows: Vec<String> = sqlx::query_scalar(sql).bind(tenant_id).fetch_all(&app.store().pool).await.unwrap();
        out.extend(rows);
    }
    out
}

async fn tenant_a_cannot_see_or_touch_tenant_b(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("alpha").await;
    let beta = app.seed_tenant("beta").await;
    let a = app.login("alpha", "admin").await;
    let b = app.login("beta", "admin").await;
    // Tenant B's resources.
    let b_user = app.get("/api/v1/users", &b).await.body["items"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b_group = app
        .post("/api/v1/groups", &b, json!({"name": "secret-team"}))
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.post(
        &format!("/api/v1/groups/{b_group}/members"),
        &b,
        json!({"user_id": b_user}),
    )
    .await;
    let b_project = app
        .post("/api/v1/projects", &b, json!({"name": "secret-project"}))
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b_token = app
        .post("/api/v1/tokens", &b, json!({"name": "b-ci"}))
        .await
        .body["info"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let a_group = app
        .post("/api/v1/groups", &a, json!({"name": "alpha-team"}))
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before = snapshot(&app, &beta).await;

    let probes: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, format!("/api/v1/users/{b_user}"), None),
        (
            Method::PATCH,
            format!("/api/v1/users/{b_user}"),
            Some(json!({"display_name": "pwned", "disabled": true})),
        ),
        (Method::DELETE, format!("/api/v1/users/{b_user}"), None),
        (Method::GET, format!("/api/v1/groups/{b_group}"), None),
        (
            Method::PATCH,
            format!("/api/v1/groups/{b_group}"),
            Some(json!({"name": "pwned"})),
        ),
        (Method::DELETE, format!("/api/v1/groups/{b_group}"), None),
        (
            Method::GET,
            format!("/api/v1/groups/{b_group}/members"),
            None,
        ),
        (
            Method::POST,
            format!("/api/v1/groups/{b_group}/members"),
            Some(json!({"user_id": b_user})),
        ),
        (
            Method::DELETE,
            format!("/api/v1/groups/{b_group}/members/{b_user}"),
            None,
        ),
        (Method::GET, format!("/api/v1/projects/{b_project}"), None),
        (
            Method::PATCH,
            format!("/api/v1/projects/{b_project}"),
            Some(json!({"name": "pwned"})),
        ),
        (
            Method::DELETE,
            format!("/api/v1/projects/{b_project}"),
            None,
        ),
        (Method::DELETE, format!("/api/v1/tokens/{b_token}"), None),
    ];
    for (method, path, body) in probes {
        let r = app.call(method.clone(), &path, Some(&a), body).await;
        assert_eq!(
            r.status,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            r.text
        );
        assert!(!r.text.contains("secret"), "{path} leaks B's data");
    }
    // Adding B's user to A's own group: B's user does not exist for A.
    let cross = app
        .post(
            &format!("/api/v1/groups/{a_group}/members"),
            &a,
            json!({"user_id": b_user}),
        )
        .await;
    assert_eq!(cross.status, StatusCode::UNPROCESSABLE_ENTITY);
    // Tenant admins cannot use the platform endpoints.
    assert_eq!(
        app.get("/api/v1/tenants", &a).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.get(&format!("/api/v1/tenants/{beta}"), &a).await.status,
        StatusCode::FORBIDDEN
    );
    // Lists never show B's rows; A's audit never shows B's entries.
    for path in [
        "/api/v1/users",
        "/api/v1/groups",
        "/api/v1/projects",
        "/api/v1/tokens",
        "/api/v1/audit?limit=500",
    ] {
        let r = app.get(path, &a).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(
            !r.text.contains(&beta) && !r.text.contains("secret"),
            "{path} shows tenant B"
        );
    }
    assert_eq!(
        before,
        snapshot(&app, &beta).await,
        "nothing of tenant B changed"
    );
    app.finish().await;
}
