//! Single sign-on against a real OpenID Connect provider (npm `oidc-provider`, started per test
//! from `end2end/idp/oidc-provider.mjs`): the full authorization code + PKCE flow through the
//! provider's own login form, just-in-time users, group sync, "required groups", immediate
//! revocation for open sessions and API tokens, and the negative cases (wrong or replayed state,
//! another browser, and ID tokens with the wrong audience, issuer, nonce, key or expiry), each
//! of which must leave no session.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};
use tokio::process::Child;

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};
use crate::sign_in::{
    assert_refused, browser_get, failure_reasons, free_port, group, location, members, set_cookie,
    spawn_node_idp,
};

both_stores!(
    oidc_sign_in_creates_the_user_and_syncs_groups,
    oidc_negative_cases_leave_no_session,
    losing_an_idp_group_revokes_access_at_once,
    idp_settings_are_validated_and_secrets_stay_hidden
);

/// The test provider, killed on drop.
pub(crate) struct Idp {
    child: Child,
    pub(crate) issuer: String,
    http: reqwest::Client,
}

impl Drop for Idp {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Idp {
    pub(crate) async fn start() -> Idp {
        Idp::start_with(&[]).await
    }

    /// With environment for the provider, e.g. `OIDC_USERS`.
    pub(crate) async fn start_with(env: &[(&str, String)]) -> Idp {
        let (child, port) = spawn_node_idp("oidc-provider.mjs", "OIDC_PORT", env).await;
        Idp {
            child,
            issuer: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .cookie_store(true)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    async fn tamper(&self, mode: &str) {
        let r = self
            .http
            .post(format!("{}/__test/tamper", self.issuer))
            .json(&json!({ "mode": mode }))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    async fn set_groups(&self, username: &str, groups: &[&str]) {
        let r = self
            .http
            .post(format!("{}/__test/groups", self.issuer))
            .json(&json!({ "username": username, "groups": groups }))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    /// Plays the browser at the IdP: follows its redirects, fills in its login form, and
    /// returns the callback URL it sends the browser back to. A fresh cookie jar per call,
    /// so each sign-in shows the form.
    pub(crate) async fn authorize(&mut self, url: &str, username: &str, password: &str) -> String {
        self.http = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut next = url.to_string();
        for _ in 0..20 {
            if next.contains("/auth/oidc/callback") {
                return next;
            }
            let r = self.http.get(&next).send().await.unwrap();
            if r.status().is_redirection() {
                let loc = r.headers()["location"].to_str().unwrap().to_string();
                next = if loc.starts_with('/') {
                    format!("{}{loc}", self.issuer)
                } else {
                    loc
                };
                continue;
            }
            let page = r.text().await.unwrap();
            assert!(
                page.contains("name=\"password\""),
                "expected the IdP's login form: {page}"
            );
            let action = next.trim_end_matches('/').to_string() + "/login";
            let r = self
                .http
                .post(&action)
                .form(&[("username", username), ("password", password)])
                .send()
                .await
                .unwrap();
            assert!(r.status().is_redirection(), "login form: {}", r.status());
            let loc = r.headers()["location"].to_str().unwrap().to_string();
            next = if loc.starts_with('/') {
                format!("{}{loc}", self.issuer)
            } else {
                loc
            };
        }
        panic!("the IdP never sent the browser back");
    }
}

/// Adds an OIDC provider for `tenant` pointing at the test IdP.
async fn add_provider(app: &TestApp, admin: &str, idp: &Idp, sync: Value) -> Value {
    let r = app
        .post(
            "/api/v1/idp",
            admin,
            json!({
                "name": "corp",
                "display_name": "Corp SSO",
                "kind": "oidc",
                "oidc": {"issuer": idp.issuer, "client_id": "switchyard"},
                "client_secret": "switchyard-oidc-secret",
                "sync": sync,
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.body
}

/// Starts the sign-in at Switchyard: returns (the IdP URL, the browser-binding cookie).
async fn start(app: &TestApp, tenant: &str) -> (String, String) {
    let r = browser_get(app, &format!("/auth/sso/{tenant}/corp?next=/portal"), &[]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let url = location(&r);
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    assert!(url.contains("nonce="), "{url}");
    (url, set_cookie(&r, "sy_sso").expect("binding cookie"))
}

/// Finishes at Switchyard's callback: returns the response.
pub(crate) async fn callback(app: &TestApp, callback_url: &str, binding: Option<&str>) -> Resp {
    let path = callback_url
        .split_once("/auth/oidc/callback")
        .map(|(_, q)| format!("/auth/oidc/callback{q}"))
        .unwrap();
    let cookies: Vec<(&str, &str)> = binding.map(|b| ("sy_sso", b)).into_iter().collect();
    browser_get(app, &path, &cookies).await
}

/// A whole sign-in; returns the session cookie.
async fn sign_in(app: &TestApp, idp: &mut Idp, tenant: &str, user: &str, pw: &str) -> String {
    let (url, binding) = start(app, tenant).await;
    let back = idp.authorize(&url, user, pw).await;
    let r = callback(app, &back, Some(&binding)).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/portal", "signed in and sent on");
    set_cookie(&r, "sy_session").expect("a session cookie")
}

pub(crate) async fn me(app: &TestApp, session: &str) -> Resp {
    browser_get(app, "/api/v1/me", &[("sy_session", session)]).await
}

async fn oidc_sign_in_creates_the_user_and_syncs_groups(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let mut idp = Idp::start().await;
    let ml = group(&app, &admin, "ml-research").await;
    let admins = group(&app, &admin, "platform-admins").await;
    add_provider(&app, &admin, &idp, json!({})).await;

    let options = app
        .call(Method::GET, "/api/v1/sign-in/acme", None, None)
        .await;
    assert_eq!(options.status, StatusCode::OK, "{}", options.text);
    assert_eq!(options.body["providers"][0]["display_name"], "Corp SSO");
    assert_eq!(
        options.body["providers"][0]["start_url"],
        "/auth/sso/acme/corp"
    );

    let session = sign_in(&app, &mut idp, "acme", "alice", "alice-pw").await;
    let who = me(&app, &session).await;
    assert_eq!(who.status, StatusCode::OK, "{}", who.text);
    assert_eq!(who.body["username"], "alice");
    assert_eq!(who.body["display_name"], "Alice Admin");
    assert_eq!(who.body["email"], "alice@acme.test");
    assert_eq!(who.body["is_tenant_admin"], false);
    assert_eq!(members(&app, &admin, &ml).await, ["alice"]);
    assert_eq!(members(&app, &admin, &admins).await, ["alice"]);

    // The IdP rotates its signing key: the token names a key the cached JWKS lacks, the JWKS
    // is fetched again, and the sign-in goes through.
    let (url, binding) = start(&app, "acme").await;
    let back = idp.authorize(&url, "alice", "alice-pw").await;
    idp.tamper("rotated").await;
    let r = callback(&app, &back, Some(&binding)).await;
    assert_eq!(location(&r), "/portal", "signed in with the rotated key");
    assert!(set_cookie(&r, "sy_session").is_some());

    // Another sign-in finds the same user (linked by subject), not a new one.
    let again = sign_in(&app, &mut idp, "acme", "alice", "alice-pw").await;
    assert_ne!(again, session);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM users WHERE username = 'alice'")
            .await,
        1
    );
    let audit = app.get("/api/v1/audit?action=auth.login", &admin).await;
    let oidc_logins = audit.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["summary"]["method"] == "oidc")
        .count();
    assert_eq!(oidc_logins, 3);
    let created = app.get("/api/v1/audit?action=user.create", &admin).await;
    assert!(created.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["actor_name"] == "idp:corp" && e["summary"]["username"] == "alice"));
    app.finish().await;
}

async fn oidc_negative_cases_leave_no_session(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let mut idp = Idp::start().await;
    add_provider(
        &app,
        &admin,
        &idp,
        json!({"required_groups": ["ml-research"]}),
    )
    .await;
    let sessions_before = app.count("SELECT COUNT(*) FROM sessions").await;

    // A state Switchyard never issued.
    let forged = callback(
        &app,
        "http://x/auth/oidc/callback?code=abc&state=forged",
        Some("whatever"),
    )
    .await;
    assert_refused(&app, &forged, "sso_state").await;

    // A real state, but from another browser (no binding cookie).
    let (url, _binding) = start(&app, "acme").await;
    let back = idp.authorize(&url, "bob", "bob-pw").await;
    let other_browser = callback(&app, &back, None).await;
    assert_refused(&app, &other_browser, "sso_state").await;
    // ...which also used it up: the right browser cannot replay it afterwards.
    let (url, binding) = start(&app, "acme").await;
    let back = idp.authorize(&url, "bob", "bob-pw").await;
    let ok = callback(&app, &back, Some(&binding)).await;
    assert!(set_cookie(&ok, "sy_session").is_some(), "{}", location(&ok));
    let replayed = callback(&app, &back, Some(&binding)).await;
    assert_refused(&app, &replayed, "sso_state").await;

    // ID tokens that must not be accepted, from the real provider with one claim changed.
    for mode in [
        "wrong_aud",
        "expired",
        "other_key",
        "bad_nonce",
        "wrong_iss",
    ] {
        let (url, binding) = start(&app, "acme").await;
        let back = idp.authorize(&url, "bob", "bob-pw").await;
        idp.tamper(mode).await;
        let r = callback(&app, &back, Some(&binding)).await;
        assert_refused(&app, &r, "sso_token").await;
    }

    // Not in a group allowed to sign in.
    let (url, binding) = start(&app, "acme").await;
    let back = idp.authorize(&url, "eve", "eve-pw").await;
    let r = callback(&app, &back, Some(&binding)).await;
    assert_refused(&app, &r, "sso_denied").await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM users WHERE username = 'eve'")
            .await,
        0,
        "a refused user is not created"
    );

    assert_eq!(
        app.count("SELECT COUNT(*) FROM sessions").await,
        sessions_before + 1,
        "only the one good sign-in made a session"
    );
    let reasons = failure_reasons(&app, &admin).await;
    assert!(
        reasons
            .iter()
            .filter(|r| r.contains("ID token rejected"))
            .count()
            == 5,
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r.contains("not in a group")));
    app.finish().await;
}

async fn losing_an_idp_group_revokes_access_at_once(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let mut idp = Idp::start().await;
    let ml = group(&app, &admin, "ml-research").await;
    add_provider(&app, &admin, &idp, json!({})).await;
    // A queue for ml-research.
    let pool = app
        .post("/api/v1/pools", &admin, json!({"name": "p", "executor": "simulated", "nodes": [{"name": "n1", "gpus": 8, "gpu_model": "H100", "gpu_memory_mb": 81920}]}))
        .await;
    let prof = app
        .post(
            "/api/v1/profiles",
            &admin,
            json!({"name": "one", "gpu_milli": 1000}),
        )
        .await;
    let pol = app
        .post(
            "/api/v1/policies",
            &admin,
            json!({"group_id": ml, "reservation_milli": 1000, "limit_milli": 2000}),
        )
        .await;
    let q = app
        .post("/api/v1/queues", &admin, json!({"name": "train", "policy_id": pol.body["id"], "profile_id": prof.body["id"], "pools": [pool.body["id"]]}))
        .await;
    assert_eq!(q.status, StatusCode::CREATED, "{}", q.text);
    let queue = q.body["id"].as_str().unwrap().to_string();

    let session = sign_in(&app, &mut idp, "acme", "bob", "bob-pw").await;
    assert_eq!(members(&app, &admin, &ml).await, ["bob"]);
    let csrf: String = sqlx::query_scalar("SELECT csrf_token FROM sessions WHERE id_hash = $1")
        .bind(switchyard::identity::secret::digest(&session))
        .fetch_one(&app.store().pool)
        .await
        .unwrap();
    let session_submit = |name: &'static str| {
        let req = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/jobs")
            .header(header::COOKIE, format!("sy_session={session}"))
            .header("x-csrf-token", &csrf)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({"queue_id": queue, "name": name, "command": "train.py"}).to_string(),
            ))
            .unwrap();
        app.raw(req)
    };
    let before = session_submit("first").await;
    assert_eq!(before.status, StatusCode::CREATED, "{}", before.text);
    // An API token bob made from his session.
    let tok = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/tokens")
        .header(header::COOKIE, format!("sy_session={session}"))
        .header("x-csrf-token", &csrf)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"name": "ci"}).to_string()))
        .unwrap();
    let tok = app.raw(tok).await;
    assert_eq!(tok.status, StatusCode::CREATED, "{}", tok.text);
    let token = tok.body["token"].as_str().unwrap().to_string();
    let by_token = app
        .post(
            "/api/v1/jobs",
            &token,
            json!({"queue_id": queue, "name": "t1", "command": "x"}),
        )
        .await;
    assert_eq!(by_token.status, StatusCode::CREATED, "{}", by_token.text);

    // The directory drops bob from ml-research; his next sign-in tells Switchyard.
    idp.set_groups("bob", &[]).await;
    let _new_session = sign_in(&app, &mut idp, "acme", "bob", "bob-pw").await;
    assert!(members(&app, &admin, &ml).await.is_empty());

    // The old session and the API token lose the queue on their very next request.
    let after = session_submit("second").await;
    assert_eq!(
        after.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        after.text
    );
    assert!(
        after.text.contains("only members of ml-research"),
        "{}",
        after.text
    );
    let by_token = app
        .post(
            "/api/v1/jobs",
            &token,
            json!({"queue_id": queue, "name": "t2", "command": "x"}),
        )
        .await;
    assert_eq!(by_token.status, StatusCode::UNPROCESSABLE_ENTITY);
    let removed = app
        .get("/api/v1/audit?action=group.member_remove", &admin)
        .await;
    let e = &removed.body["items"][0];
    assert_eq!(e["actor_name"], "idp:corp");
    assert_eq!(e["summary"]["username"], "bob");

    // A membership an admin added by hand is not the IdP's to remove.
    let bob_id = me(&app, &session).await.body["user_id"]
        .as_str()
        .unwrap()
        .to_string();
    let add = app
        .post(
            &format!("/api/v1/groups/{ml}/members"),
            &admin,
            json!({ "user_id": bob_id }),
        )
        .await;
    assert_eq!(add.status, StatusCode::CREATED, "{}", add.text);
    sign_in(&app, &mut idp, "acme", "bob", "bob-pw").await;
    assert_eq!(members(&app, &admin, &ml).await, ["bob"]);
    app.finish().await;
}

async fn idp_settings_are_validated_and_secrets_stay_hidden(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    app.seed_tenant("globex").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let idp = Idp::start().await;

    let bad = app
        .post(
            "/api/v1/idp",
            &admin,
            json!({"name": "Bad Name!", "display_name": "", "kind": "oidc", "oidc": {"issuer": "ftp://idp.example.com", "client_id": ""}}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let fields: Vec<&str> = bad.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "name",
            "display_name",
            "oidc.issuer",
            "oidc.client_id",
            "client_secret"
        ]
    );
    let forbidden = app
        .post(
            "/api/v1/idp",
            &member,
            json!({"name": "x", "display_name": "x", "kind": "oidc"}),
        )
        .await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);

    let created = add_provider(&app, &admin, &idp, json!({})).await;
    assert_eq!(created["has_client_secret"], true);
    assert_eq!(
        created["redirect_uri"],
        "http://127.0.0.1:3000/auth/oidc/callback"
    );
    let id = created["id"].as_str().unwrap();
    let listed = app.get("/api/v1/idp", &admin).await;
    assert!(!listed.text.contains("switchyard-oidc-secret"));
    let audit = app.get("/api/v1/audit?action=idp.create", &admin).await;
    assert!(!audit.text.contains("switchyard-oidc-secret"));
    assert_eq!(audit.body["items"][0]["summary"]["secret_changed"], true);

    let checks = app
        .post(&format!("/api/v1/idp/{id}/test"), &admin, json!({}))
        .await;
    assert_eq!(checks.status, StatusCode::OK, "{}", checks.text);
    assert!(
        checks
            .body
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true),
        "{}",
        checks.text
    );
    // Pointed at nothing, the test says which step failed.
    let dead = app
        .call(
            Method::PUT,
            &format!("/api/v1/idp/{id}"),
            Some(&admin),
            Some(json!({"name": "corp", "display_name": "Corp SSO", "kind": "oidc", "oidc": {"issuer": format!("http://127.0.0.1:{}", free_port()), "client_id": "switchyard"}})),
        )
        .await;
    assert_eq!(dead.status, StatusCode::OK, "{}", dead.text);
    assert_eq!(dead.body["has_client_secret"], true, "the secret is kept");
    let checks = app
        .post(&format!("/api/v1/idp/{id}/test"), &admin, json!({}))
        .await;
    assert_eq!(checks.body[0]["step"], "discovery");
    assert_eq!(checks.body[0]["ok"], false);
    assert!(checks.body[0]["detail"]
        .as_str()
        .unwrap()
        .contains("discovery failed"));

    // Another tenant neither sees nor reaches it.
    let other = app.login("globex", "admin").await;
    let theirs = app.get("/api/v1/idp", &other).await;
    assert_eq!(theirs.body, json!([]));
    let get = app.get(&format!("/api/v1/idp/{id}"), &other).await;
    assert_eq!(get.status, StatusCode::NOT_FOUND);
    let r = browser_get(&app, "/auth/sso/globex/corp", &[]).await;
    assert!(location(&r).contains("error=sso_unknown"));

    // Password sign-in can be turned off for the tenant.
    let off = app
        .call(
            Method::PUT,
            "/api/v1/sign-in-settings",
            Some(&admin),
            Some(json!({"password_login": false})),
        )
        .await;
    assert_eq!(off.status, StatusCode::OK, "{}", off.text);
    let refused = app
        .call(
            Method::POST,
            "/api/v1/auth/login",
            None,
            Some(json!({"tenant": "acme", "username": "member", "password": crate::common::PASSWORD})),
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let options = app
        .call(Method::GET, "/api/v1/sign-in/acme", None, None)
        .await;
    assert_eq!(options.body["password_login"], false);
    app.finish().await;
}
