//! Bad input answers 4xx problem documents, never a 500; the API surface is documented.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(
    bad_input_is_a_clear_problem,
    openapi_lists_every_operation,
    health_and_metrics
);

async fn bad_input_is_a_clear_problem(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let send = |path: &str, content_type: &str, body: Vec<u8>| {
        Request::post(path.to_string())
            .header(header::AUTHORIZATION, format!("Bearer {admin}"))
            .header(header::CONTENT_TYPE, content_type.to_string())
            .body(Body::from(body))
            .unwrap()
    };
    let cases: Vec<(Request<Body>, StatusCode, &str)> = vec![
        (
            send(
                "/api/v1/groups",
                "application/json",
                b"{\"name\": ".to_vec(),
            ),
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
        (
            send(
                "/api/v1/groups",
                "application/json",
                b"{\"name\": 42}".to_vec(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation",
        ),
        (
            send("/api/v1/groups", "application/json", b"{}".to_vec()),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation",
        ),
        (
            send(
                "/api/v1/groups",
                "application/json",
                b"{\"name\":\"x\",\"colour\":\"red\"}".to_vec(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation",
        ),
        (
            send("/api/v1/groups", "text/plain", b"name=x".to_vec()),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
        ),
        (
            send("/api/v1/groups", "application/json", vec![b' '; 2 << 20]),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
        ),
        (
            send("/api/v1/groups", "application/json", b"[1,2,3]".to_vec()),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation",
        ),
        (
            send("/api/v1/groups", "application/json", vec![0xff, 0xfe]),
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
        (
            send("/api/v1/nothing-here", "application/json", b"{}".to_vec()),
            StatusCode::NOT_FOUND,
            "not-found",
        ),
    ];
    for (i, (req, status, kind)) in cases.into_iter().enumerate() {
        let r = app.raw(req).await;
        assert_eq!(r.status, status, "case {i}: {}", r.text);
        assert_eq!(
            r.headers[header::CONTENT_TYPE],
            "application/problem+json",
            "case {i}"
        );
        assert_eq!(
            r.body["type"],
            format!("https://switchyard.dev/problems/{kind}"),
            "case {i}"
        );
        assert_eq!(r.body["status"], status.as_u16());
    }
    let missing = app.post("/api/v1/groups", &admin, json!({})).await;
    assert_eq!(missing.body["errors"][0]["field"], "name");
    let wrong = app
        .post("/api/v1/groups", &admin, json!({"name": 42}))
        .await;
    assert_eq!(wrong.body["errors"][0]["field"], "name");
    let r = app
        .call(Method::PUT, "/api/v1/groups", Some(&admin), None)
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    for path in [
        "/api/v1/audit?from=yesterday",
        "/api/v1/audit?cursor=abc",
        "/api/v1/audit?limit=100000",
    ] {
        let r = app.get(path, &admin).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path}: {}",
            r.text
        );
    }
    // Nothing was created by any of it.
    assert_eq!(app.count("SELECT COUNT(*) FROM groups").await, 0);
    app.finish().await;
}

async fn openapi_lists_every_operation(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let r = app
        .call(Method::GET, "/api/v1/openapi.json", None, None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["openapi"], "3.1.0");
    let paths = r.body["paths"].as_object().unwrap();
    let mut ops = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            ops.push(format!("{} {path}", method.to_uppercase()));
        }
    }
    ops.sort();
    let expected = [
        "DELETE /api/v1/access-rules/{id}",
        "DELETE /api/v1/datasets/{id}",
        "DELETE /api/v1/groups/{id}",
        "DELETE /api/v1/groups/{id}/members/{user_id}",
        "DELETE /api/v1/idp/{id}",
        "DELETE /api/v1/models/{id}",
        "DELETE /api/v1/projects/{id}",
        "DELETE /api/v1/scim/token",
        "DELETE /api/v1/tokens/{id}",
        "DELETE /api/v1/users/{id}",
        "GET /api/v1/access-rules",
        "GET /api/v1/audit",
        "GET /api/v1/datasets",
        "GET /api/v1/datasets/{id}",
        "GET /api/v1/groups",
        "GET /api/v1/groups/{id}",
        "GET /api/v1/groups/{id}/members",
        "GET /api/v1/idp",
        "GET /api/v1/idp/{id}",
        "GET /api/v1/jobs",
        "GET /api/v1/jobs/{id}",
        "GET /api/v1/me",
        "GET /api/v1/models",
        "GET /api/v1/models/{id}",
        "GET /api/v1/policies",
        "GET /api/v1/policies/{id}",
        "GET /api/v1/pools",
        "GET /api/v1/pools/{id}",
        "GET /api/v1/pools/{id}/grants",
        "GET /api/v1/profiles",
        "GET /api/v1/profiles/{id}",
        "GET /api/v1/projects",
        "GET /api/v1/projects/{id}",
        "GET /api/v1/queues",
        "GET /api/v1/queues/{id}",
        "GET /api/v1/scheduling/overview",
        "GET /api/v1/sign-in/{tenant}",
        "GET /api/v1/tenants",
        "GET /api/v1/tenants/{id}",
        "GET /api/v1/tokens",
        "GET /api/v1/users",
        "GET /api/v1/users/{id}",
        "GET /api/v1/users/{id}/access",
        "PATCH /api/v1/groups/{id}",
        "PATCH /api/v1/projects/{id}",
        "PATCH /api/v1/users/{id}",
        "POST /api/v1/access-rules",
        "POST /api/v1/auth/login",
        "POST /api/v1/auth/logout",
        "POST /api/v1/datasets",
        "POST /api/v1/groups",
        "POST /api/v1/groups/{id}/members",
        "POST /api/v1/idp",
        "POST /api/v1/idp/{id}/test",
        "POST /api/v1/jobs",
        "POST /api/v1/jobs/batch",
        "POST /api/v1/jobs/{id}/abort",
        "POST /api/v1/models",
        "POST /api/v1/policies",
        "POST /api/v1/pools",
        "POST /api/v1/profiles",
        "POST /api/v1/projects",
        "POST /api/v1/queues",
        "POST /api/v1/scim/token",
        "POST /api/v1/tenants",
        "POST /api/v1/tokens",
        "POST /api/v1/users",
        "PUT /api/v1/idp/{id}",
        "PUT /api/v1/pools/{id}/grants/{tenant_id}",
        "PUT /api/v1/sign-in-settings",
    ];
    assert_eq!(ops, expected);
    let schemas = r.body["components"]["schemas"].as_object().unwrap();
    for s in [
        "Job",
        "JobDetail",
        "PolicyOverview",
        "Pool",
        "Profile",
        "Policy",
        "Queue",
        "User",
        "Group",
        "Member",
        "Project",
        "ApiToken",
        "NewToken",
        "AuditEntry",
        "TenantSummary",
        "Problem",
        "LoginRequest",
    ] {
        assert!(schemas.contains_key(s), "schema {s}");
    }
    // Every documented operation exists on the router (none answers 404 or 405 for its route).
    for op in &expected {
        let (method, path) = op.split_once(' ').unwrap();
        let path = path
            .replace("{id}", "x")
            .replace("{user_id}", "y")
            .replace("{tenant}", "acme");
        let r = app.call(method.parse().unwrap(), &path, None, None).await;
        assert!(
            r.status != StatusCode::METHOD_NOT_ALLOWED && r.status != StatusCode::NOT_FOUND,
            "{op}: {}",
            r.status
        );
    }
    app.finish().await;
}

async fn health_and_metrics(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    assert_eq!(
        app.call(Method::GET, "/healthz", None, None).await.text,
        "ok"
    );
    assert_eq!(
        app.call(Method::GET, "/readyz", None, None).await.text,
        "ready"
    );
    let token = app.login("acme", "admin").await;
    app.get("/api/v1/users", &token).await;
    // Without a metrics token, `/metrics` answers clients on this host.
    let m = app
        .raw(crate::common::from_ip(
            Request::get("/metrics").body(Body::empty()).unwrap(),
            "127.0.0.1",
        ))
        .await;
    assert!(m.headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    assert!(m.text.contains("switchyard_http_requests_total{method=\"GET\",route=\"/api/v1/users\",status=\"200\"} 1"), "{}", m.text);
    assert!(m.text.contains("switchyard_users 2"));
    assert!(m.text.contains("switchyard_http_request_duration_seconds_bucket{method=\"POST\",route=\"/api/v1/auth/login\",le=\"+Inf\"} 1"));
    // Every response carries a request id.
    assert!(m.headers.contains_key("x-request-id"));
    app.finish().await;
}
