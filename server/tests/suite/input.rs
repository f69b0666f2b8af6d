//! Bad input answers 4xx problem documents, never a 500; the API surface is documented.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(
    bad_input_is_a_clear_problem,
    audit_times_out_of_range_are_a_problem,
    job_numbers_never_overflow,
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
        "DELETE /api/v1/endpoints/{id}",
        "DELETE /api/v1/endpoints/{id}/targets/{target_id}",
        "DELETE /api/v1/gateway-tokens/{id}",
        "DELETE /api/v1/gateways/{id}",
        "DELETE /api/v1/groups/{id}",
        "DELETE /api/v1/groups/{id}/members/{user_id}",
        "DELETE /api/v1/idp/{id}",
        "DELETE /api/v1/models/{id}",
        "DELETE /api/v1/policies/{id}",
        "DELETE /api/v1/pools/{id}",
        "DELETE /api/v1/profiles/{id}",
        "DELETE /api/v1/projects/{id}",
        "DELETE /api/v1/queues/{id}",
        "DELETE /api/v1/routes/{id}",
        "DELETE /api/v1/scim/token",
        "DELETE /api/v1/tcp-routes/{id}",
        "DELETE /api/v1/tokens/{id}",
        "DELETE /api/v1/users/{id}",
        "GET /api/v1/access-rules",
        "GET /api/v1/audit",
        "GET /api/v1/datasets",
        "GET /api/v1/datasets/{id}",
        "GET /api/v1/endpoints",
        "GET /api/v1/endpoints/{id}",
        "GET /api/v1/endpoints/{id}/metrics",
        "GET /api/v1/gateway-tokens",
        "GET /api/v1/gateways",
        "GET /api/v1/gateways/{id}",
        "GET /api/v1/gateways/{id}/certificate",
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
        "GET /api/v1/routes",
        "GET /api/v1/routes/{id}",
        "GET /api/v1/scheduling/history",
        "GET /api/v1/scheduling/overview",
        "GET /api/v1/sign-in/{tenant}",
        "GET /api/v1/tcp-routes",
        "GET /api/v1/tcp-routes/{id}",
        "GET /api/v1/tenants",
        "GET /api/v1/tenants/{id}",
        "GET /api/v1/tokens",
        "GET /api/v1/users",
        "GET /api/v1/users/{id}",
        "GET /api/v1/users/{id}/access",
        "PATCH /api/v1/groups/{id}",
        "PATCH /api/v1/pools/{id}",
        "PATCH /api/v1/profiles/{id}",
        "PATCH /api/v1/projects/{id}",
        "PATCH /api/v1/queues/{id}",
        "PATCH /api/v1/routes/{id}",
        "PATCH /api/v1/tcp-routes/{id}",
        "PATCH /api/v1/users/{id}",
        "POST /api/v1/access-rules",
        "POST /api/v1/auth/login",
        "POST /api/v1/auth/logout",
        "POST /api/v1/datasets",
        "POST /api/v1/endpoints",
        "POST /api/v1/endpoints/{id}/targets",
        "POST /api/v1/gateways",
        "POST /api/v1/gateways/{id}/tokens",
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
        "POST /api/v1/routes",
        "POST /api/v1/scim/token",
        "POST /api/v1/tcp-routes",
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

/// Asserts a 422 problem document whose field errors name `field`.
fn assert_field_problem(r: &crate::common::Resp, field: &str, what: &str) {
    assert_eq!(
        r.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{what}: {}",
        r.text
    );
    assert_eq!(
        r.headers[header::CONTENT_TYPE],
        "application/problem+json",
        "{what}"
    );
    let fields: Vec<&str> = r.body["errors"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["field"].as_str()).collect())
        .unwrap_or_default();
    assert!(fields.contains(&field), "{what}: {}", r.text);
}

/// Times out of range (a year whose milliseconds overflow i64 panicked) or with signs in them
/// (negative hours were accepted) are 422 naming the parameter.
async fn audit_times_out_of_range_are_a_problem(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    for (query, field) in [
        ("from=99999999999999-01-01", "from"),
        ("to=99999999999999-12-31", "to"),
        ("from=2026-01-01T-5:-3:00Z", "from"),
        ("to=2026-01-01T05:-3:00Z", "to"),
        ("from=9223372036854775807", "from"),
        ("to=-9223372036854775808", "to"),
        ("from=10000-01-01", "from"),
        ("from=2026-02-30", "from"),
    ] {
        let r = app.get(&format!("/api/v1/audit?{query}"), &admin).await;
        assert_field_problem(&r, field, query);
    }
    for query in [
        "from=2026-01-01T05:03:00Z",
        "from=0000-01-01&to=9999-12-31",
        "to=253402300799999",
    ] {
        let r = app.get(&format!("/api/v1/audit?{query}"), &admin).await;
        assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.text);
    }
    app.finish().await;
}

/// A browser session (cookie) and its CSRF token, as the sign-in form makes them.
async fn browser_session(app: &TestApp, username: &str) -> (String, String) {
    let form = format!(
        "tenant=acme&username={username}&password={}&next=%2Fportal",
        crate::common::PASSWORD
    );
    let r = app
        .raw(
            Request::post("/auth/login")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let cookie = r.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let csrf: String = sqlx::query_scalar("SELECT csrf_token FROM sessions")
        .fetch_one(&app.store().pool)
        .await
        .unwrap();
    (cookie, csrf)
}

/// Times in seconds on the portal's job form became milliseconds with `s * 1000`: a panic on
/// i64::MAX (debug builds) or a silent wrap (release). Now they are checked and in range,
/// through the form and the API alike, and nothing is created.
async fn job_numbers_never_overflow(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let group = app
        .post("/api/v1/groups", &admin, json!({"name": "ml"}))
        .await;
    let policy = app
        .post("/api/v1/policies", &admin, json!({"group_id": group.body["id"], "reservation_milli": 1000, "limit_milli": 2000, "over_quota_weight": 1}))
        .await;
    assert_eq!(policy.status, StatusCode::OK, "{}", policy.text);
    let pool = app
        .post("/api/v1/pools", &admin, json!({"name": "p", "executor": "simulated", "nodes": [{"name": "n1", "gpus": 2, "gpu_model": "A100", "gpu_memory_mb": 81920, "cpu_cores": 8, "memory_mb": 65536}]}))
        .await;
    assert_eq!(pool.status, StatusCode::CREATED, "{}", pool.text);
    let profile = app
        .post(
            "/api/v1/profiles",
            &admin,
            json!({"name": "one", "gpu_milli": 1000}),
        )
        .await;
    assert_eq!(profile.status, StatusCode::CREATED, "{}", profile.text);
    let queue = app
        .post("/api/v1/queues", &admin, json!({"name": "q", "policy_id": policy.body["id"], "profile_id": profile.body["id"], "pools": [pool.body["id"]]}))
        .await;
    assert_eq!(queue.status, StatusCode::CREATED, "{}", queue.text);
    let queue_id = queue.body["id"].as_str().unwrap().to_string();

    // The API takes milliseconds and checks their range.
    for (extra, field) in [
        (json!({"duration_ms": i64::MAX}), "duration_ms"),
        (json!({"duration_ms": -1}), "duration_ms"),
        (json!({"max_runtime_ms": i64::MIN}), "max_runtime_ms"),
        (
            json!({"abort": {"kind": "bash", "command": "true", "timeout_ms": -9223372036854775807_i64}}),
            "abort.timeout_ms",
        ),
    ] {
        let mut body =
            json!({"queue_id": queue_id, "name": "j", "command": "sleep 1", "gpu_milli": 1000});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = app.post("/api/v1/jobs", &admin, body).await;
        assert_field_problem(&r, field, field);
    }

    // The page's form takes seconds, posted as a browser without JavaScript would (asking
    // for JSON to read the error, as the hydrated page does).
    let (cookie, csrf) = browser_session(&app, "admin").await;
    let form = |duration: &str, max_runtime: &str, abort_timeout: &str| {
        let body = format!(
            "csrf={csrf}&queue_id={queue_id}&name=j&command=sleep+1&gpu_milli=1000&priority_class=&duration_s={duration}&max_runtime_s={max_runtime}&checkpoint_dir=&abort_kind=bash&abort_command=true&abort_timeout_s={abort_timeout}"
        );
        Request::post("/_sf/jobs/submit")
            .header(header::COOKIE, cookie.clone())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(Body::from(body))
            .unwrap()
    };
    for (duration, max_runtime, abort_timeout, field) in [
        ("9223372036854775807", "", "30", "duration_s"),
        ("-1", "", "30", "duration_s"),
        ("60", "9223372036854775807", "30", "max_runtime_s"),
        ("60", "-9223372036854775807", "30", "max_runtime_s"),
        ("60", "", "-9223372036854775807", "abort_timeout_s"),
        ("60", "", "9223372036854775807", "abort_timeout_s"),
        // 2^64 / 1000 + 1: wraps to a small positive number of milliseconds in release builds.
        ("18446744073709552", "", "30", "duration_s"),
    ] {
        let what = format!(
            "duration_s={duration} max_runtime_s={max_runtime} abort_timeout_s={abort_timeout}"
        );
        let r = app.raw(form(duration, max_runtime, abort_timeout)).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{what}: {}",
            r.text
        );
        assert!(r.text.contains(field), "{what}: {}", r.text);
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM jobs").await, 0);
    // In range, the form submits.
    let ok = app.raw(form("60", "3600", "30")).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    let stored: (Option<i64>, Option<i64>, i64) =
        sqlx::query_as("SELECT duration_ms, max_runtime_ms, abort_timeout_ms FROM jobs")
            .fetch_one(&app.store().pool)
            .await
            .unwrap();
    assert_eq!(stored, (Some(60_000), Some(3_600_000), 30_000));
    app.finish().await;
}
