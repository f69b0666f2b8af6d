//! Which user an IdP identity becomes at its first sign-in, against the real OpenID Connect
//! test provider: a user provisioned before (SCIM) is linked only by a verified e-mail address
//! equal to theirs in one of the provider's allowed domains, never by username alone; a user
//! linked to one provider cannot be claimed through another; a local account is never taken.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};
use crate::sign_in::{assert_refused, browser_get, failure_reasons, location, set_cookie};
use crate::sso::{callback, me, Idp};

both_stores!(
    scim_provisioned_users_are_linked_by_verified_email_in_an_allowed_domain,
    a_second_provider_cannot_take_over_a_linked_user,
    another_domain_cannot_claim_a_provisioned_user_by_username
);

fn body(idp: &Idp, name: &str, oidc: Value, domains: &[&str]) -> Value {
    let mut o = json!({"issuer": idp.issuer, "client_id": "switchyard"});
    if let (Some(o), Some(extra)) = (o.as_object_mut(), oidc.as_object()) {
        o.extend(extra.clone());
    }
    json!({"name": name, "display_name": name, "kind": "oidc", "oidc": o,
        "client_secret": "switchyard-oidc-secret", "allowed_email_domains": domains})
}

/// Adds OIDC provider `name` at the test IdP; returns its id.
async fn add(
    app: &TestApp,
    admin: &str,
    idp: &Idp,
    name: &str,
    oidc: Value,
    domains: &[&str],
) -> String {
    let r = app
        .post("/api/v1/idp", admin, body(idp, name, oidc, domains))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["allowed_email_domains"], json!(domains));
    r.body["id"].as_str().unwrap().to_string()
}

/// A whole sign-in through provider `name`; returns Switchyard's callback response.
async fn attempt(app: &TestApp, idp: &mut Idp, name: &str, user: &str, pw: &str) -> Resp {
    let r = browser_get(app, &format!("/auth/sso/acme/{name}?next=/portal"), &[]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let binding = set_cookie(&r, "sy_sso").expect("binding cookie");
    let back = idp.authorize(&location(&r), user, pw).await;
    callback(app, &back, Some(&binding)).await
}

/// The session a successful sign-in made.
fn session(r: &Resp) -> String {
    assert_eq!(location(r), "/portal", "signed in");
    set_cookie(r, "sy_session").expect("a session cookie")
}

/// Pushes a user by SCIM, as an IdP's connector does before the first sign-in; returns its id.
async fn scim_user(app: &TestApp, admin: &str, username: &str, email: &str) -> String {
    let token = app.post("/api/v1/scim/token", admin, json!({})).await.body["token"]
        .as_str()
        .unwrap()
        .to_string();
    let req = Request::builder()
        .method(Method::POST)
        .uri("/scim/v2/Users")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/scim+json")
        .body(Body::from(
            json!({"userName": username, "displayName": format!("{username} (SCIM)"),
                "emails": [{"value": email, "primary": true}]})
            .to_string(),
        ))
        .unwrap();
    let pushed = app.raw(req).await;
    assert_eq!(pushed.status, StatusCode::CREATED, "{}", pushed.text);
    pushed.body["id"].as_str().unwrap().to_string()
}

async fn links(app: &TestApp, user_id: &str) -> i64 {
    app.count(&format!(
        "SELECT COUNT(*) FROM external_identities WHERE user_id = '{user_id}'"
    ))
    .await
}

/// The legitimate path: the IdP's verified address equals the provisioned one, in an allowed
/// domain: linked, not refused or duplicated, and later sign-ins find it by subject.
async fn scim_provisioned_users_are_linked_by_verified_email_in_an_allowed_domain(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let mut idp = Idp::start().await;
    let bob = scim_user(&app, &admin, "bob", "bob@acme.test").await;
    add(&app, &admin, &idp, "corp", json!({}), &["acme.test"]).await;
    let s = session(&attempt(&app, &mut idp, "corp", "bob", "bob-pw").await);
    assert_eq!(me(&app, &s).await.body["user_id"], bob, "the same account");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM users WHERE username = 'bob'")
            .await,
        1
    );
    let linked = app.get("/api/v1/audit?action=user.link", &admin).await;
    assert_eq!(linked.body["items"][0]["actor_name"], "idp:corp");
    assert_eq!(linked.body["items"][0]["summary"]["email"], "bob@acme.test");
    let again = session(&attempt(&app, &mut idp, "corp", "bob", "bob-pw").await);
    assert_eq!(me(&app, &again).await.body["user_id"], bob);
    assert_eq!(links(&app, &bob).await, 1);
    app.finish().await;
}

async fn a_second_provider_cannot_take_over_a_linked_user(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let mut idp = Idp::start().await;
    let bob = scim_user(&app, &admin, "bob", "bob@acme.test").await;
    add(&app, &admin, &idp, "corp", json!({}), &["acme.test"]).await;
    add(&app, &admin, &idp, "other", json!({}), &["acme.test"]).await;
    let s = session(&attempt(&app, &mut idp, "corp", "bob", "bob-pw").await);
    assert_eq!(me(&app, &s).await.body["user_id"], bob);
    let sessions = app.count("SELECT COUNT(*) FROM sessions").await;

    // The same person at a second provider, even with the right address: bob is corp's.
    let r = attempt(&app, &mut idp, "other", "bob", "bob-pw").await;
    assert_refused(&app, &r, "sso_link").await;
    assert_eq!(links(&app, &bob).await, 1, "no second link");
    assert_eq!(app.count("SELECT COUNT(*) FROM sessions").await, sessions);
    let reasons = failure_reasons(&app, &admin).await;
    assert!(reasons[0].contains("linked to another"), "{reasons:?}");
    // A just-in-time user of corp is not the other provider's either.
    session(&attempt(&app, &mut idp, "corp", "alice", "alice-pw").await);
    let r = attempt(&app, &mut idp, "other", "alice", "alice-pw").await;
    assert_refused(&app, &r, "sso_link").await;
    app.finish().await;
}

async fn another_domain_cannot_claim_a_provisioned_user_by_username(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    // Usernames come from the e-mail's local part (no such claim): mallory's address
    // alice@other-domain.test makes her `alice`.
    let users = json!([
        {"sub": "u-alice", "username": "alice", "password": "alice-pw", "email": "alice@acme.test", "name": "Alice", "groups": []},
        {"sub": "u-mallory", "username": "mallory", "password": "mallory-pw", "email": "alice@other-domain.test", "name": "Mallory", "groups": []},
        {"sub": "u-admin", "username": "admin", "password": "admin-pw", "email": "admin@acme.test", "name": "Not the admin", "groups": []},
    ]);
    let mut idp = Idp::start_with(&[("OIDC_USERS", users.to_string())]).await;
    let alice = scim_user(&app, &admin, "alice", "alice@acme.test").await;
    let by_email = json!({"username_claim": "nickname"});
    let id = add(&app, &admin, &idp, "corp", by_email.clone(), &[]).await;
    let sessions = app.count("SELECT COUNT(*) FROM sessions").await;

    // No allowed domains: no linking by e-mail at all, even the right one.
    let r = attempt(&app, &mut idp, "corp", "alice", "alice-pw").await;
    assert_refused(&app, &r, "sso_link").await;
    // An allowed domain, but not alice's address.
    let put = app
        .call(
            Method::PUT,
            &format!("/api/v1/idp/{id}"),
            Some(&admin),
            Some(body(
                &idp,
                "corp",
                by_email,
                &["acme.test", "other-domain.test"],
            )),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text);
    let r = attempt(&app, &mut idp, "corp", "mallory", "mallory-pw").await;
    assert_refused(&app, &r, "sso_link").await;
    assert_eq!(links(&app, &alice).await, 0, "mallory did not get alice");
    assert_eq!(app.count("SELECT COUNT(*) FROM sessions").await, sessions);
    // A local account (with a password) is never taken, whatever the address.
    let r = attempt(&app, &mut idp, "corp", "admin", "admin-pw").await;
    assert_refused(&app, &r, "sso_account").await;

    // Alice's own verified address in an allowed domain links her; mallory stays out.
    let s = session(&attempt(&app, &mut idp, "corp", "alice", "alice-pw").await);
    assert_eq!(me(&app, &s).await.body["user_id"], alice);
    let r = attempt(&app, &mut idp, "corp", "mallory", "mallory-pw").await;
    assert_refused(&app, &r, "sso_link").await;
    assert_eq!(links(&app, &alice).await, 1);
    app.finish().await;
}
