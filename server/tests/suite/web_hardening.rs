//! What every response and every caller-supplied string is held to: security headers, the
//! request id, `/metrics` access, the public sign-in options, and free text.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{from_ip, login_request, Kind, Resp, TestApp};

both_stores!(
    request_ids_are_plain_tokens,
    metrics_need_the_token_or_this_host,
    sign_in_options_do_not_reveal_tenants,
    security_headers_on_every_response,
    free_text_refuses_control_and_bidi_characters,
    no_server_function_answers_a_cross_site_post,
    pages_answer_while_other_routers_are_built
);

async fn request_ids_are_plain_tokens(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let long = "a".repeat(10 * 1024);
    for (sent, kept) in [
        (long.as_str(), false),
        ("abc\tdef", false),
        ("x\",\"action\":\"forged", false),
        ("req-42.ok_1", true),
    ] {
        let mut req = login_request("acme", "member", crate::common::PASSWORD);
        req.headers_mut()
            .insert("x-request-id", sent.parse().unwrap());
        let r = app.raw(req).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let answered = r.headers["x-request-id"].to_str().unwrap().to_string();
        let logged: String = sqlx::query_scalar(
            "SELECT request_id FROM audit_log WHERE action = 'auth.login' ORDER BY seq DESC LIMIT 1",
        )
        .fetch_one(&app.store().pool)
        .await
        .unwrap();
        assert_eq!(logged, answered, "the log and the response agree");
        if kept {
            assert_eq!(logged, sent);
        } else {
            assert!(
                uuid::Uuid::parse_str(&logged).is_ok(),
                "a fresh id, not {:.40}",
                logged
            );
        }
    }
    app.finish().await;
}

async fn metrics(app: &TestApp, ip: Option<&str>, auth: Option<&str>) -> Resp {
    let mut b = Request::get("/metrics");
    if let Some(a) = auth {
        b = b.header(header::AUTHORIZATION, a);
    }
    let req = b.body(Body::empty()).unwrap();
    app.raw(match ip {
        Some(ip) => from_ip(req, ip),
        None => req,
    })
    .await
}

async fn metrics_need_the_token_or_this_host(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    // No token configured: this host only.
    assert_eq!(
        metrics(&app, None, None).await.status,
        StatusCode::NOT_FOUND
    );
    let remote = metrics(&app, Some("203.0.113.9"), None).await;
    assert_eq!(remote.status, StatusCode::NOT_FOUND);
    assert!(!remote.text.contains("switchyard_users"));
    for local in ["127.0.0.1", "::1"] {
        let m = metrics(&app, Some(local), None).await;
        assert_eq!(m.status, StatusCode::OK, "{local}");
        assert!(m.text.contains("switchyard_users 2"));
    }
    app.finish().await;

    let app = TestApp::with_settings(kind, |c| c.metrics_token = Some("m-secret-123".into())).await;
    app.seed_tenant("acme").await;
    for (ip, auth) in [
        (Some("127.0.0.1"), None),
        (Some("127.0.0.1"), Some("Bearer wrong")),
        (None, Some("Bearer m-secret-1234")),
        (None, Some("m-secret-123")),
    ] {
        let r = metrics(&app, ip, auth).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{ip:?} {auth:?}");
        assert!(!r.text.contains("switchyard_users"));
    }
    let m = metrics(&app, Some("203.0.113.9"), Some("Bearer m-secret-123")).await;
    assert_eq!(m.status, StatusCode::OK, "{}", m.text);
    assert!(m.text.contains("switchyard_users 2"));
    app.finish().await;
}

async fn sign_in_options_do_not_reveal_tenants(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let known = app
        .call(Method::GET, "/api/v1/sign-in/acme", None, None)
        .await;
    let unknown = app
        .call(Method::GET, "/api/v1/sign-in/nowhere", None, None)
        .await;
    assert_eq!(known.status, StatusCode::OK);
    assert_eq!(unknown.status, known.status, "{}", unknown.text);
    let same: Value = serde_json::from_str(&known.text.replace("acme", "nowhere")).unwrap();
    assert_eq!(unknown.body, same);
    assert_eq!(
        unknown.body,
        json!({"tenant_slug": "nowhere", "tenant_name": "nowhere", "password_login": true, "providers": []})
    );
    // The page, too, offers the password form rather than saying there is no such tenant.
    let page = app
        .raw(
            Request::get("/t/nowhere/login")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("name=\"password\""), "{}", page.text);
    assert!(!page.text.contains("There is no organization"));
    app.finish().await;
}

fn assert_security_headers(r: &Resp, what: &str, page: bool) {
    let h = |name: &str| {
        r.headers
            .get(name)
            .unwrap_or_else(|| panic!("{what}: no {name}"))
            .to_str()
            .unwrap()
            .to_string()
    };
    let csp = h("content-security-policy");
    assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
    if page {
        for part in [
            "script-src 'self' 'nonce-",
            "'wasm-unsafe-eval'",
            "form-action 'self'",
            "base-uri 'self'",
        ] {
            assert!(csp.contains(part), "{what}: {csp}");
        }
        // Inline scripts run by this response's nonce, not by 'unsafe-inline'; Leptos puts the
        // nonce on every inline script it renders (hydration, resolved resources).
        let script_src = csp.split(';').find(|d| d.contains("script-src")).unwrap();
        assert!(!script_src.contains("unsafe-inline"), "{what}: {csp}");
        let nonce = script_src
            .split("'nonce-")
            .nth(1)
            .and_then(|n| n.split('\'').next())
            .unwrap();
        let mut inline = 0;
        for tag in r.text.split("<script").skip(1) {
            let tag = tag.split('>').next().unwrap();
            if !tag.contains("src=") {
                inline += 1;
                assert!(
                    tag.contains(&format!("nonce=\"{nonce}\"")),
                    "{what}: <script{tag}>"
                );
            }
        }
        assert!(inline > 0, "{what}: the hydration script is inline");
    } else {
        assert!(csp.starts_with("default-src 'none'"), "{what}: {csp}");
    }
    assert_eq!(h("x-frame-options"), "DENY", "{what}");
    assert_eq!(h("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(h("referrer-policy"), "same-origin", "{what}");
}

async fn security_headers_on_every_response(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let token = app.login("acme", "admin").await;
    let page = app
        .raw(Request::get("/login").body(Body::empty()).unwrap())
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert_security_headers(&page, "page", true);
    assert!(
        !page.headers.contains_key("strict-transport-security"),
        "no HSTS over plain http"
    );
    // A signed-in page with resources resolved on the server, and the 404 page.
    let form = format!(
        "tenant=acme&username=admin&password={}&next=%2Fsettings",
        crate::common::PASSWORD
    );
    let signed_in = app
        .raw(
            Request::post("/auth/login")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form))
                .unwrap(),
        )
        .await;
    let cookie = signed_in.headers[header::SET_COOKIE].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let settings = app
        .raw(
            Request::get("/settings")
                .header(header::COOKIE, cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(settings.status, StatusCode::OK);
    assert_security_headers(&settings, "signed-in page", true);
    let not_found = app
        .raw(Request::get("/no-such-page").body(Body::empty()).unwrap())
        .await;
    assert_eq!(not_found.status, StatusCode::NOT_FOUND);
    assert_security_headers(&not_found, "404 page", true);
    let api = app.get("/api/v1/me", &token).await;
    assert_eq!(api.status, StatusCode::OK);
    assert_security_headers(&api, "api", false);
    let unauthorized = app.call(Method::GET, "/api/v1/me", None, None).await;
    assert_eq!(unauthorized.status, StatusCode::UNAUTHORIZED);
    assert_security_headers(&unauthorized, "401", false);
    let missing = app.get("/api/v1/nothing-here", &token).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_security_headers(&missing, "404", false);
    let redirect = app
        .raw(Request::get("/portal").body(Body::empty()).unwrap())
        .await;
    assert_eq!(redirect.status, StatusCode::SEE_OTHER);
    assert_security_headers(&redirect, "redirect", false);
    app.finish().await;

    let app = TestApp::with_settings(kind, |c| {
        c.public_url = Some("https://sy.example".into());
    })
    .await;
    let r = app.call(Method::GET, "/healthz", None, None).await;
    assert_security_headers(&r, "healthz", false);
    assert_eq!(
        r.headers["strict-transport-security"], "max-age=31536000",
        "HSTS when users come over https"
    );
    app.finish().await;
}

async fn free_text_refuses_control_and_bidi_characters(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let member_id = app.user_id(&admin, "member").await;
    let cases: Vec<(Method, String, Value, &str)> = vec![
        (
            Method::POST,
            "/api/v1/groups".into(),
            json!({"name": "ops\u{0}"}),
            "name",
        ),
        (
            Method::POST,
            "/api/v1/groups".into(),
            json!({"name": "ops", "description": "fine \u{202E}txt.exe"}),
            "description",
        ),
        (
            Method::POST,
            "/api/v1/projects".into(),
            json!({"name": "p\u{2066}x\u{2069}"}),
            "name",
        ),
        (
            Method::POST,
            "/api/v1/users".into(),
            json!({"username": "eve", "display_name": "Eve\u{1b}[31m", "password": "a-long-enough-pw"}),
            "display_name",
        ),
        (
            Method::PATCH,
            format!("/api/v1/users/{member_id}"),
            json!({"display_name": "admin\u{202E}"}),
            "display_name",
        ),
        (
            Method::POST,
            "/api/v1/tokens".into(),
            json!({"name": "ci\nbot"}),
            "name",
        ),
    ];
    for (method, path, body, field) in cases {
        let r = app.call(method, &path, Some(&admin), Some(body)).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path}: {}",
            r.text
        );
        assert_eq!(r.body["errors"][0]["field"], field, "{path}: {}", r.text);
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM groups").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM projects").await, 0);
    // Line breaks in a description, right-to-left names and their marks are fine.
    let ok = app
        .post(
            "/api/v1/groups",
            &admin,
            json!({"name": "צוות\u{200F} ml", "description": "line one\nline two"}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.text);
    app.finish().await;
}

/// CSRF is one layer for every page action: a cross-site POST to any registered server
/// function, with a valid session cookie, is refused before the function runs. The list comes
/// from the server function registry, so a new one cannot be left out.
async fn no_server_function_answers_a_cross_site_post(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let form = format!(
        "tenant=acme&username=admin&password={}&next=%2Fsettings",
        crate::common::PASSWORD
    );
    let signed_in = app
        .raw(
            Request::post("/auth/login")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form))
                .unwrap(),
        )
        .await;
    let cookie = signed_in.headers[header::SET_COOKIE].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let paths: Vec<&str> = server_fn::axum::server_fn_paths()
        .filter(|(_, m)| *m == Method::POST)
        .map(|(p, _)| p)
        .collect();
    assert!(
        paths.len() >= 30,
        "only {} server functions found",
        paths.len()
    );
    let before: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log")
        .fetch_one(&app.state.store.pool)
        .await
        .unwrap();
    for path in &paths {
        for (name, value) in [
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ] {
            let resp = app
                .raw(
                    Request::post(*path)
                        .header(header::HOST, "sy.example")
                        .header(header::COOKIE, &cookie)
                        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                        .header(name, value)
                        .body(Body::from(
                            "csrf=x&name=evil&user_id=x&group_id=x&job_id=x&id=x",
                        ))
                        .unwrap(),
                )
                .await;
            assert_eq!(
                resp.status,
                StatusCode::FORBIDDEN,
                "{path} with {name}: {}",
                resp.text
            );
        }
    }
    let after: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log")
        .fetch_one(&app.state.store.pool)
        .await
        .unwrap();
    assert_eq!(before, after, "a refused request changed something");
    app.finish().await;
}

/// Building a router used to render the app under Leptos' process-wide "suppress resource
/// loads" flag; a page whose resource started meanwhile, in any other router, waited forever
/// (the suite's rare hang). Pages must answer while routers are being built.
async fn pages_answer_while_other_routers_are_built(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let state = app.state.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let building = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut built = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _router = switchyard::routes::app(state.clone());
                built += 1;
                tokio::task::yield_now().await;
            }
            built
        })
    };
    for i in 0..40 {
        let page = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            app.raw(Request::get("/t/acme/login").body(Body::empty()).unwrap()),
        )
        .await
        .unwrap_or_else(|_| panic!("the sign-in page did not answer (request {i})"));
        assert_eq!(page.status, StatusCode::OK);
        assert!(
            page.text.contains("acme") || page.text.contains("Sign in"),
            "{}",
            page.text
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let built = building.await.unwrap();
    assert!(built > 0, "no router was built meanwhile");
    app.finish().await;
}
