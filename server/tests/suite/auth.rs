//! Sign-in, tokens, sessions, CSRF and throttling.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp, PASSWORD};

both_stores!(
    login_issues_a_working_token,
    wrong_credentials_are_one_answer,
    throttling_stops_guessing,
    tokens_are_hashed_listed_and_revocable,
    session_cookie_needs_csrf_for_api_writes,
    disabled_user_loses_access_at_once,
    deleted_user_loses_access_at_once,
    logout_revokes_the_token
);

async fn login_issues_a_working_token(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let token = app.login("acme", "admin").await;
    assert!(token.starts_with("syt_"));
    let me = app.get("/api/v1/me", &token).await;
    assert_eq!(me.status, StatusCode::OK);
    assert_eq!(me.body["username"], "admin");
    assert_eq!(me.body["tenant_slug"], "acme");
    assert_eq!(me.body["is_tenant_admin"], true);
    // Without a token: 401 problem with a WWW-Authenticate challenge.
    let anon = app.call(Method::GET, "/api/v1/me", None, None).await;
    assert_eq!(anon.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        anon.headers[header::CONTENT_TYPE],
        "application/problem+json"
    );
    assert!(anon.headers.contains_key(header::WWW_AUTHENTICATE));
    assert_eq!(
        app.call(Method::GET, "/api/v1/me", Some("syt_forged"), None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    // The login is audited.
    assert_eq!(
        app.count("SELECT COUNT(*) FROM audit_log WHERE action = 'auth.login'")
            .await,
        1
    );
    app.finish().await;
}

async fn wrong_credentials_are_one_answer(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    for (tenant, user, pw) in [
        ("acme", "admin", "wrong-password-123"),
        ("acme", "nobody", PASSWORD),
        ("nowhere", "admin", PASSWORD),
    ] {
        let r = app
            .call(
                Method::POST,
                "/api/v1/auth/login",
                None,
                Some(json!({"tenant": tenant, "username": user, "password": pw})),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{tenant}/{user}");
        assert_eq!(
            r.body["type"],
            "https://switchyard.dev/problems/unauthenticated"
        );
    }
    // Failures in an existing tenant are audited there; no token was issued.
    assert_eq!(
        app.count("SELECT COUNT(*) FROM audit_log WHERE action = 'auth.login_failed'")
            .await,
        2
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM api_tokens").await, 0);
    app.finish().await;
}

async fn throttling_stops_guessing(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    for _ in 0..5 {
        let r = app
            .call(
                Method::POST,
                "/api/v1/auth/login",
                None,
                Some(
                    json!({"tenant": "acme", "username": "admin", "password": "guess-guess-guess"}),
                ),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    // Even the right password is refused while the account is throttled.
    let r = app
        .call(
            Method::POST,
            "/api/v1/auth/login",
            None,
            Some(json!({"tenant": "acme", "username": "admin", "password": PASSWORD})),
        )
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = r.headers[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry > 0 && retry <= 900, "{retry}");
    // Another account is unaffected.
    app.login("acme", "member").await;
    app.finish().await;
}

async fn tokens_are_hashed_listed_and_revocable(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let login = app.login("acme", "member").await;
    let created = app
        .post(
            "/api/v1/tokens",
            &login,
            json!({"name": "ci", "expires_in_days": 7}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let secret = created.body["token"].as_str().unwrap().to_string();
    let id = created.body["info"]["id"].as_str().unwrap().to_string();
    assert_eq!(app.get("/api/v1/me", &secret).await.status, StatusCode::OK);
    // The secret is never stored or listed.
    let stored: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM api_tokens WHERE token_hash = $1 OR prefix = $1")
            .bind(&secret)
            .fetch_one(&app.store().pool)
            .await
            .unwrap();
    assert_eq!(stored, 0);
    let list = app.get("/api/v1/tokens", &login).await;
    assert!(!list.text.contains(&secret));
    assert_eq!(list.body.as_array().unwrap().len(), 2);
    // Out-of-range lifetimes are refused at the field.
    let bad = app
        .post(
            "/api/v1/tokens",
            &login,
            json!({"name": "x", "expires_in_days": 9999}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.body["errors"][0]["field"], "expires_in_days");
    // Revoke: it stops working on the very next request.
    assert_eq!(
        app.delete(&format!("/api/v1/tokens/{id}"), &login)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/api/v1/me", &secret).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM audit_log WHERE action = 'token.revoke'")
            .await,
        1
    );
    app.finish().await;
}

/// Signs in through the web form; returns the session cookie.
pub(crate) async fn web_session(app: &TestApp, username: &str) -> String {
    let form = format!("tenant=acme&username={username}&password={PASSWORD}&next=%2Fsettings");
    let r = app
        .raw(
            Request::post("/auth/login")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.headers[header::LOCATION], "/settings");
    let set = r.headers[header::SET_COOKIE].to_str().unwrap().to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Lax"),
        "{set}"
    );
    set.split(';').next().unwrap().to_string()
}

async fn session_cookie_needs_csrf_for_api_writes(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let cookie = web_session(&app, "admin").await;
    let csrf: String = sqlx::query_scalar("SELECT csrf_token FROM sessions")
        .fetch_one(&app.store().pool)
        .await
        .unwrap();
    let post = |extra: Option<(&'static str, String)>| {
        let mut b = Request::post("/api/v1/groups")
            .header(header::COOKIE, cookie.clone())
            .header(header::CONTENT_TYPE, "application/json");
        if let Some((k, v)) = extra {
            b = b.header(k, v);
        }
        b.body(Body::from(json!({"name": "via-cookie"}).to_string()))
            .unwrap()
    };
    assert_eq!(
        app.raw(post(None)).await.status,
        StatusCode::FORBIDDEN,
        "no CSRF header"
    );
    assert_eq!(
        app.raw(post(Some(("x-csrf-token", "wrong".into()))))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.raw(post(Some(("origin", "https://evil.example".into()))))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.raw(post(Some(("x-csrf-token", csrf.clone()))))
            .await
            .status,
        StatusCode::CREATED
    );
    // Server functions check the form's CSRF field too.
    let sf = |token: &str| {
        Request::post("/_sf/groups/create")
            .header(header::COOKIE, cookie.clone())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(Body::from(format!(
                "csrf={token}&name=from-page&description="
            )))
            .unwrap()
    };
    let refused = app.raw(sf("forged")).await;
    assert!(
        !refused.status.is_success() || refused.text.contains("Forbidden"),
        "{} {}",
        refused.status,
        refused.text
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM groups WHERE name = 'from-page'")
            .await,
        0
    );
    let ok = app.raw(sf(&csrf)).await;
    assert!(
        ok.status.is_success() || ok.status.is_redirection(),
        "{} {}",
        ok.status,
        ok.text
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM groups WHERE name = 'from-page'")
            .await,
        1
    );
    // A signed-in page renders; signed out, pages redirect to the sign-in page.
    let page = app
        .raw(
            Request::get("/settings")
                .header(header::COOKIE, cookie.clone())
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.text.contains("via-cookie"),
        "the SSR page lists the group"
    );
    let anon = app
        .raw(Request::get("/settings").body(Body::empty()).unwrap())
        .await;
    assert_eq!(anon.status, StatusCode::SEE_OTHER);
    assert!(anon.headers[header::LOCATION]
        .to_str()
        .unwrap()
        .starts_with("/login?next="));
    // Every page of the console sends a signed-out visitor to the sign-in page, and back.
    for page in [
        "/portal",
        "/jobs",
        "/history",
        "/catalog",
        "/policy",
        "/platform",
        "/audit",
        "/settings/users/x",
    ] {
        let anon = app
            .raw(Request::get(page).body(Body::empty()).unwrap())
            .await;
        assert_eq!(anon.status, StatusCode::SEE_OTHER, "{page}");
        assert_eq!(
            anon.headers[header::LOCATION].to_str().unwrap(),
            format!("/login?next={}", page.replace('/', "%2F")),
            "{page}"
        );
    }
    app.finish().await;
}

async fn disabled_user_loses_access_at_once(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let cookie = web_session(&app, "member").await;
    let users = app.get("/api/v1/users", &admin).await;
    let member_id = users.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "member")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The member's token is in use (its caller is known between requests): a change to the
    // user shows on its very next request.
    let me = app.get("/api/v1/me", &member).await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.text);
    assert_ne!(me.body["display_name"], "Renamed Member");
    let r = app
        .patch(
            &format!("/api/v1/users/{member_id}"),
            &admin,
            json!({"display_name": "Renamed Member"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        app.get("/api/v1/me", &member).await.body["display_name"],
        "Renamed Member"
    );
    let r = app
        .patch(
            &format!("/api/v1/users/{member_id}"),
            &admin,
            json!({"disabled": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["disabled"], true);
    assert_eq!(
        app.get("/api/v1/me", &member).await.status,
        StatusCode::UNAUTHORIZED,
        "token"
    );
    let page = app
        .raw(
            Request::get("/portal")
                .header(header::COOKIE, cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "session");
    let login = app
        .call(
            Method::POST,
            "/api/v1/auth/login",
            None,
            Some(json!({"tenant": "acme", "username": "member", "password": PASSWORD})),
        )
        .await;
    assert_eq!(login.status, StatusCode::UNAUTHORIZED, "sign-in");
    // An admin cannot lock themselves out.
    let me_id = app.get("/api/v1/me", &admin).await.body["user_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .patch(
            &format!("/api/v1/users/{me_id}"),
            &admin,
            json!({"disabled": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    app.finish().await;
}

/// A deleted user's token, in use until then, is refused on its next request (its caller is
/// known between requests only until access changes).
async fn deleted_user_loses_access_at_once(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let me = app.get("/api/v1/me", &member).await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.text);
    let id = me.body["user_id"].as_str().unwrap().to_string();
    assert_eq!(
        app.delete(&format!("/api/v1/users/{id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/api/v1/me", &member).await.status,
        StatusCode::UNAUTHORIZED
    );
    app.finish().await;
}

async fn logout_revokes_the_token(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let token = app.login("acme", "member").await;
    // In use before: its caller is known between requests.
    assert_eq!(app.get("/api/v1/me", &token).await.status, StatusCode::OK);
    let r = app
        .call(Method::POST, "/api/v1/auth/logout", Some(&token), None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get("/api/v1/me", &token).await.status,
        StatusCode::UNAUTHORIZED
    );
    app.finish().await;
}
