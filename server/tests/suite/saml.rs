//! SAML 2.0 sign-in against a real IdP (npm `samlify` with xml-crypto signing, started per test
//! from `end2end/idp/saml-idp.mjs`): SP-initiated HTTP-Redirect AuthnRequest, the IdP's own
//! login form, the HTTP-POST response to the ACS (sent cross-site, without cookies), the
//! browser's hop to `/auth/saml/finish` with its binding cookie, JIT users and group sync from
//! AD-style DNs. Then what must fail closed, each leaving no session: an unsigned assertion,
//! signature wrapping (two forms), a change after signing, another key, wrong audience,
//! recipient or issuer, expired and not yet valid assertions, an InResponseTo of a request never
//! made, a replayed response, a response meant for another tenant's SP, an unsolicited
//! response, and a finish step from another browser.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};
use tokio::process::Child;

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};
use crate::sign_in::{
    assert_refused, browser_get, failure_reasons, group, location, members, set_cookie,
    spawn_node_idp,
};

both_stores!(
    saml_sign_in_creates_the_user_and_syncs_groups,
    saml_negative_cases_fail_closed,
    a_junk_post_does_not_cancel_a_saml_sign_in
);

/// What the test app calls itself (its `Config::default()` base URL).
pub(crate) const BASE: &str = "http://127.0.0.1:3000";

/// The test IdP, killed on drop.
pub(crate) struct SamlIdp {
    child: Child,
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
}

impl Drop for SamlIdp {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The IdP's registration of one of our providers.
pub(crate) fn sp(tenant: &str) -> Value {
    json!({
        "entity_id": format!("{BASE}/auth/saml/{tenant}/corp/metadata"),
        "acs_url": format!("{BASE}/auth/saml/{tenant}/corp/acs"),
    })
}

/// Unescapes what the IdP's HTML escaping does to attribute values.
pub(crate) fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The value of a hidden field of an HTML form.
pub(crate) fn hidden(page: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker)? + marker.len();
    let end = page[start..].find('"')? + start;
    Some(unescape(&page[start..end]))
}

/// What the IdP's auto-posting page would send to the ACS.
pub(crate) struct Posted {
    pub(crate) acs_path: String,
    pub(crate) saml_response: String,
    pub(crate) relay_state: String,
}

impl SamlIdp {
    pub(crate) async fn start(sps: Value) -> SamlIdp {
        let (child, port) = spawn_node_idp(
            "saml-idp.mjs",
            "SAML_PORT",
            &[("SAML_SPS", sps.to_string())],
        )
        .await;
        SamlIdp {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    pub(crate) async fn test_hook(&self, path: &str, body: Value) {
        let r = self
            .http
            .post(format!("{}/__test/{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
    }

    pub(crate) async fn tamper(&self, mode: &str) {
        self.test_hook("tamper", json!({ "mode": mode })).await;
    }

    /// Plays the browser at the IdP: opens the redirect, fills in the login form, and returns
    /// what the auto-posting page sends to the ACS.
    pub(crate) async fn authorize(&self, url: &str, username: &str, password: &str) -> Posted {
        assert!(url.starts_with(&self.base), "sent to the IdP: {url}");
        assert!(
            url.contains("SAMLRequest=") && url.contains("RelayState="),
            "{url}"
        );
        let r = self.http.get(url).send().await.unwrap();
        assert_eq!(r.status(), 200, "the IdP takes the AuthnRequest");
        let page = r.text().await.unwrap();
        assert!(
            page.contains("name=\"password\""),
            "the IdP's login form: {page}"
        );
        let mut form = vec![
            ("username".to_string(), username.to_string()),
            ("password".to_string(), password.to_string()),
        ];
        for name in ["SAMLRequest", "RelayState", "binding"] {
            if let Some(v) = hidden(&page, name) {
                form.push((name.to_string(), v));
            }
        }
        let r = self
            .http
            .post(format!("{}/sso/login", self.base))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "signed in at the IdP");
        let page = r.text().await.unwrap();
        let action = page
            .split("action=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .map(unescape)
            .expect("the auto-posting form");
        Posted {
            acs_path: action.strip_prefix(BASE).unwrap_or(&action).to_string(),
            saml_response: hidden(&page, "SAMLResponse").expect("SAMLResponse"),
            relay_state: hidden(&page, "RelayState").expect("RelayState"),
        }
    }
}

/// The IdP's cross-site POST to an ACS: another origin, and no cookies (SameSite=Lax).
pub(crate) async fn post_to_acs(
    app: &TestApp,
    idp: &SamlIdp,
    path: &str,
    response: &str,
    relay: &str,
) -> Resp {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("SAMLResponse", response)
        .append_pair("RelayState", relay)
        .finish();
    app.raw(
        Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ORIGIN, &idp.base)
            .header("sec-fetch-site", "cross-site")
            .body(Body::from(body))
            .unwrap(),
    )
    .await
}

/// Adds the SAML provider `corp` for the admin's tenant, from the IdP's metadata URL.
pub(crate) async fn add_provider(app: &TestApp, admin: &str, idp: &SamlIdp, sync: Value) -> Value {
    let r = app
        .post(
            "/api/v1/idp",
            admin,
            json!({
                "name": "corp",
                "display_name": "Corp SAML",
                "kind": "saml",
                "saml": {"idp_metadata_url": format!("{}/metadata", idp.base)},
                "sync": sync,
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.body
}

/// Starts a sign-in at Switchyard: returns (the IdP URL, the browser-binding cookie).
pub(crate) async fn start(app: &TestApp, tenant: &str) -> (String, String) {
    let r = browser_get(app, &format!("/auth/sso/{tenant}/corp?next=/portal"), &[]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    (
        location(&r),
        set_cookie(&r, "sy_sso").expect("binding cookie"),
    )
}

/// The browser's hop after the ACS, with its binding cookie (or none).
pub(crate) async fn finish(app: &TestApp, acs: &Resp, binding: Option<&str>) -> Resp {
    assert_eq!(acs.status, StatusCode::SEE_OTHER, "{}", acs.text);
    let hop = location(acs);
    assert!(hop.starts_with("/auth/saml/finish?t="), "{hop}");
    assert!(
        set_cookie(acs, "sy_session").is_none(),
        "the ACS makes no session"
    );
    let cookies: Vec<(&str, &str)> = binding.map(|b| ("sy_sso", b)).into_iter().collect();
    browser_get(app, &hop, &cookies).await
}

/// A whole sign-in; returns the session cookie.
pub(crate) async fn sign_in(
    app: &TestApp,
    idp: &SamlIdp,
    tenant: &str,
    user: &str,
    pw: &str,
) -> String {
    let (url, binding) = start(app, tenant).await;
    let posted = idp.authorize(&url, user, pw).await;
    assert_eq!(posted.acs_path, format!("/auth/saml/{tenant}/corp/acs"));
    let acs = post_to_acs(
        app,
        idp,
        &posted.acs_path,
        &posted.saml_response,
        &posted.relay_state,
    )
    .await;
    let r = finish(app, &acs, Some(&binding)).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert_eq!(location(&r), "/portal", "signed in and sent on");
    set_cookie(&r, "sy_session").expect("a session cookie")
}

/// The reason of the newest failed sign-in in the audit log.
pub(crate) async fn last_failure(app: &TestApp, admin: &str) -> String {
    failure_reasons(app, admin).await.swap_remove(0)
}

pub(crate) async fn saml_sign_in_creates_the_user_and_syncs_groups(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let idp = SamlIdp::start(json!([sp("acme")])).await;
    // Groups arrive as AD-style DNs: CN=ml-research,OU=Groups,DC=acme,DC=test.
    idp.test_hook("config", json!({"groups_as_dn": true})).await;
    let ml = group(&app, &admin, "ml-research").await;
    let admins = group(&app, &admin, "platform-admins").await;
    let created = add_provider(&app, &admin, &idp, json!({})).await;
    assert_eq!(
        created["saml"]["idp_entity_id"],
        format!("{}/metadata", idp.base),
        "read from the IdP's metadata"
    );
    assert_eq!(created["saml"]["idp_sso_url"], format!("{}/sso", idp.base));
    assert_eq!(
        created["saml"]["idp_certificates"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        created["redirect_uri"],
        format!("{BASE}/auth/saml/acme/corp/acs")
    );
    assert_eq!(
        created["sp_entity_id"],
        format!("{BASE}/auth/saml/acme/corp/metadata")
    );

    // The SP metadata is at the entity ID, for the IdP's administrator.
    let md = browser_get(&app, "/auth/saml/acme/corp/metadata", &[]).await;
    assert_eq!(md.status, StatusCode::OK);
    assert_eq!(
        md.headers[header::CONTENT_TYPE],
        "application/samlmetadata+xml"
    );
    assert!(
        md.text
            .contains(&format!("entityID=\"{BASE}/auth/saml/acme/corp/metadata\"")),
        "{}",
        md.text
    );
    assert!(
        md.text
            .contains(&format!("Location=\"{BASE}/auth/saml/acme/corp/acs\"")),
        "{}",
        md.text
    );
    assert!(
        md.text.contains("WantAssertionsSigned=\"true\""),
        "{}",
        md.text
    );
    let none = browser_get(&app, "/auth/saml/acme/nope/metadata", &[]).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);

    let options = app
        .call(Method::GET, "/api/v1/sign-in/acme", None, None)
        .await;
    assert_eq!(options.body["providers"][0]["kind"], "saml");
    assert_eq!(
        options.body["providers"][0]["start_url"],
        "/auth/sso/acme/corp"
    );

    let session = sign_in(&app, &idp, "acme", "alice", "alice-pw").await;
    let who = browser_get(&app, "/api/v1/me", &[("sy_session", &session)]).await;
    assert_eq!(who.status, StatusCode::OK, "{}", who.text);
    assert_eq!(who.body["username"], "alice");
    assert_eq!(who.body["display_name"], "Alice Admin");
    assert_eq!(who.body["email"], "alice@acme.test");
    assert_eq!(
        members(&app, &admin, &ml).await,
        ["alice"],
        "DN reduced to its CN"
    );
    assert_eq!(members(&app, &admin, &admins).await, ["alice"]);

    // The IdP drops a group: the next sign-in removes the membership, same user.
    idp.test_hook(
        "groups",
        json!({"username": "alice", "groups": ["ml-research"]}),
    )
    .await;
    let again = sign_in(&app, &idp, "acme", "alice", "alice-pw").await;
    assert_ne!(again, session);
    assert_eq!(members(&app, &admin, &admins).await, Vec::<String>::new());
    assert_eq!(members(&app, &admin, &ml).await, ["alice"]);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM users WHERE username = 'alice'")
            .await,
        1
    );
    let audit = app.get("/api/v1/audit?action=auth.login", &admin).await;
    let saml_logins = audit.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["summary"]["method"] == "saml")
        .count();
    assert_eq!(saml_logins, 2, "{}", audit.text);
    app.finish().await;
}

pub(crate) async fn saml_negative_cases_fail_closed(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    app.seed_tenant("globex").await;
    let admin = app.login("acme", "admin").await;
    let globex_admin = app.login("globex", "admin").await;
    let idp = SamlIdp::start(json!([sp("acme"), sp("globex")])).await;
    add_provider(
        &app,
        &admin,
        &idp,
        json!({"required_groups": ["ml-research"]}),
    )
    .await;
    add_provider(&app, &globex_admin, &idp, json!({})).await;
    let acs = "/auth/saml/acme/corp/acs";
    let sessions_before = app.count("SELECT COUNT(*) FROM sessions").await;

    // Responses the IdP signs (or not) with one thing wrong.
    // Each with the reason the audit log must give.
    let modes = [
        ("unsigned", "must be signed"),
        ("wrapping", "2 assertions"),
        ("wrapping_extensions", "2 assertions"),
        ("modified_after_signing", "must be signed"),
        ("other_key", "must be signed"),
        ("wrong_audience", "AudienceRequirement"),
        ("wrong_recipient", "Recipient does not match"),
        ("wrong_issuer", "Issuer does not match"),
        ("expired", "expired at"),
        ("not_yet_valid", "not valid until"),
        ("bad_in_response_to", "InResponseTo"),
    ];
    for (mode, reason) in modes {
        let (url, _binding) = start(&app, "acme").await;
        idp.tamper(mode).await;
        let posted = idp.authorize(&url, "bob", "bob-pw").await;
        let r = post_to_acs(&app, &idp, acs, &posted.saml_response, &posted.relay_state).await;
        assert!(
            location(&r).contains("error=sso_token"),
            "{mode} must be refused: {}",
            location(&r)
        );
        assert_refused(&app, &r, "sso_token").await;
        assert!(
            last_failure(&app, &admin).await.contains(reason),
            "{mode}: {}",
            last_failure(&app, &admin).await
        );
    }
    assert_eq!(
        app.count("SELECT COUNT(*) FROM users WHERE username IN ('alice', 'bob', 'mallory')")
            .await,
        0,
        "no wrapped or altered identity got in, and bob was not created either"
    );

    // A good response works once; posted again it is refused.
    let (url, binding) = start(&app, "acme").await;
    let good = idp.authorize(&url, "bob", "bob-pw").await;
    let first = post_to_acs(&app, &idp, acs, &good.saml_response, &good.relay_state).await;
    let replayed = post_to_acs(&app, &idp, acs, &good.saml_response, &good.relay_state).await;
    assert_refused(&app, &replayed, "sso_state").await;
    // ...and under a fresh sign-in request it answers the wrong request.
    let (url2, _b2) = start(&app, "acme").await;
    let fresh = idp.authorize(&url2, "bob", "bob-pw").await;
    let r = post_to_acs(&app, &idp, acs, &good.saml_response, &fresh.relay_state).await;
    assert_refused(&app, &r, "sso_token").await;
    assert!(last_failure(&app, &admin).await.contains("InResponseTo"));

    // The finish step needs the browser that started the sign-in.
    let other_browser = finish(&app, &first, Some("someone-else")).await;
    assert_refused(&app, &other_browser, "sso_state").await;
    let used_up = finish(&app, &first, Some(&binding)).await;
    assert_refused(&app, &used_up, "sso_state").await;

    // A response the IdP made for globex's SP, posted to acme's ACS.
    let (acme_url, _ab) = start(&app, "acme").await;
    let acme_posted = idp.authorize(&acme_url, "bob", "bob-pw").await;
    let (globex_url, _gb) = start(&app, "globex").await;
    let globex_posted = idp.authorize(&globex_url, "bob", "bob-pw").await;
    assert_eq!(globex_posted.acs_path, "/auth/saml/globex/corp/acs");
    let r = post_to_acs(
        &app,
        &idp,
        acs,
        &globex_posted.saml_response,
        &acme_posted.relay_state,
    )
    .await;
    assert_refused(&app, &r, "sso_token").await;
    assert!(last_failure(&app, &admin)
        .await
        .contains("AudienceRequirement"));
    // ...or with its own RelayState: that request belongs to another tenant's provider.
    let r = post_to_acs(
        &app,
        &idp,
        acs,
        &globex_posted.saml_response,
        &globex_posted.relay_state,
    )
    .await;
    assert_refused(&app, &r, "sso_state").await;

    // Unsolicited (IdP-initiated): no RelayState.
    let r = post_to_acs(&app, &idp, acs, &acme_posted.saml_response, "").await;
    assert_refused(&app, &r, "sso_state").await;
    // Not a form at all.
    let r = app
        .raw(
            Request::builder()
                .method(Method::POST)
                .uri(acs)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .await;
    assert_refused(&app, &r, "sso_state").await;

    // Verified, but not in a group allowed to sign in.
    let (url, binding) = start(&app, "acme").await;
    let eve = idp.authorize(&url, "eve", "eve-pw").await;
    let r = post_to_acs(&app, &idp, acs, &eve.saml_response, &eve.relay_state).await;
    let r = finish(&app, &r, Some(&binding)).await;
    assert_refused(&app, &r, "sso_denied").await;

    assert_eq!(
        app.count("SELECT COUNT(*) FROM sessions").await,
        sessions_before,
        "no refused case made a session"
    );
    let reasons = failure_reasons(&app, &admin).await;
    assert_eq!(
        reasons
            .iter()
            .filter(|r| r.contains("SAML response rejected"))
            .count(),
        modes.len() + 2,
        "{reasons:?}"
    );
    app.finish().await;
}

/// The RelayState travels through the browser; a POST with it and a junk or unsigned response
/// is refused without using up the sign-in, which the genuine response then completes.
pub(crate) async fn a_junk_post_does_not_cancel_a_saml_sign_in(kind: Kind) {
    use base64::Engine;
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let idp = SamlIdp::start(json!([sp("acme")])).await;
    add_provider(&app, &admin, &idp, json!({})).await;
    let acs = "/auth/saml/acme/corp/acs";
    let (url, binding) = start(&app, "acme").await;
    let good = idp.authorize(&url, "bob", "bob-pw").await;

    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let unsigned = r#"<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_x" Version="2.0" IssueInstant="2024-01-01T00:00:00Z"><saml:Assertion ID="_a" Version="2.0" IssueInstant="2024-01-01T00:00:00Z"><saml:Subject><saml:NameID>mallory</saml:NameID></saml:Subject></saml:Assertion></samlp:Response>"#;
    for junk in [
        "not base64 at all!".to_string(),
        b64("<junk/>"),
        b64(unsigned),
    ] {
        let r = post_to_acs(&app, &idp, acs, &junk, &good.relay_state).await;
        assert_refused(&app, &r, "sso_token").await;
    }
    let acs_resp = post_to_acs(&app, &idp, acs, &good.saml_response, &good.relay_state).await;
    let r = finish(&app, &acs_resp, Some(&binding)).await;
    assert_eq!(
        location(&r),
        "/portal",
        "the genuine response still signs in"
    );
    assert!(set_cookie(&r, "sy_session").is_some());
    // ...once: the request is used up now.
    let again = post_to_acs(&app, &idp, acs, &good.saml_response, &good.relay_state).await;
    assert_refused(&app, &again, "sso_state").await;
    app.finish().await;
}
