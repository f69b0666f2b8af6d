//! Identity providers cannot be used to reach the server's own network (SSRF): with private IdP
//! addresses not allowed (the default), an OIDC issuer, a SAML metadata or single sign-on URL
//! and an LDAP server on loopback, private or link-local addresses are refused on save, and a
//! provider saved while they were allowed (or a name that now resolves there) is refused at
//! "test connection" and at sign-in. The message is generic, the same for an open and a closed
//! port, and nothing connects: a listener on the port accepts no connection.

use std::net::TcpListener;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use base64::Engine;
use serde_json::{json, Value};
use switchyard::config::Config;

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};
use crate::sign_in::{browser_get, free_port, location};

both_stores!(
    oidc_issuers_on_private_addresses_are_refused,
    saml_urls_on_private_addresses_are_refused,
    ldap_servers_on_private_addresses_are_refused
);

const NOT_ALLOWED: &str = "the identity provider's address is not allowed";

/// A port that is open (a listener that must never see a connection).
struct Trap(TcpListener);

impl Trap {
    fn new() -> Trap {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        Trap(l)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    fn assert_untouched(&self) {
        match self.0.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok((_, peer)) => panic!("the server connected to a refused address (from {peer})"),
            Err(e) => panic!("accept: {e}"),
        }
    }
}

async fn app(kind: Kind) -> (TestApp, String) {
    let app = TestApp::with_config(kind, Config::default()).await;
    assert!(!app.state.config.allow_private_idp_addresses);
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    (app, admin)
}

/// A refused save: 422 problem+json naming `field`; returns its message.
fn refused(r: &Resp, field: &str) -> String {
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/problem+json");
    r.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["field"] == field)
        .unwrap_or_else(|| panic!("{field}: {}", r.text))["message"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Saves a provider while private addresses are allowed, then serves the database with them
/// refused again; returns the provider's id.
async fn saved_while_allowed(app: &mut TestApp, admin: &str, body: Value) -> String {
    app.reconfigure(|c| c.allow_private_idp_addresses = true);
    let r = app.post("/api/v1/idp", admin, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    app.reconfigure(|c| c.allow_private_idp_addresses = false);
    r.body["id"].as_str().unwrap().to_string()
}

/// "Test connection": the check named `step`.
async fn test_step(app: &TestApp, admin: &str, id: &str, step: &str) -> Value {
    let r = app
        .post(&format!("/api/v1/idp/{id}/test"), admin, json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["step"] == step)
        .unwrap_or_else(|| panic!("{step}: {}", r.text))
        .clone()
}

fn oidc(name: &str, issuer: &str) -> Value {
    json!({"name": name, "display_name": "Corp", "kind": "oidc",
        "oidc": {"issuer": issuer, "client_id": "switchyard"}, "client_secret": "s"})
}

async fn oidc_issuers_on_private_addresses_are_refused(kind: Kind) {
    let (mut app, admin) = app(kind).await;
    let trap = Trap::new();
    let port = trap.port();

    let r = app
        .post(
            "/api/v1/idp",
            &admin,
            oidc("corp", &format!("http://127.0.0.1:{port}")),
        )
        .await;
    assert!(refused(&r, "oidc.issuer").contains("https"), "{}", r.text);
    for issuer in [
        format!("https://127.0.0.1:{port}"),
        format!("https://localhost:{port}"),
        format!("https://[::ffff:127.0.0.1]:{port}"),
        format!("https://[::1]:{port}"),
        "https://169.254.169.254".to_string(),
        "https://10.0.0.1".to_string(),
        "https://100.64.0.1".to_string(),
    ] {
        let r = app.post("/api/v1/idp", &admin, oidc("corp", &issuer)).await;
        assert_eq!(refused(&r, "oidc.issuer"), NOT_ALLOWED, "{issuer}");
    }
    // Allowed private addresses still take plain http to public hosts nowhere.
    app.reconfigure(|c| c.allow_private_idp_addresses = true);
    let r = app
        .post("/api/v1/idp", &admin, oidc("corp", "http://8.8.8.8"))
        .await;
    assert_eq!(refused(&r, "oidc.issuer"), NOT_ALLOWED);
    let r = app
        .post(
            "/api/v1/idp",
            &admin,
            oidc("corp", "https://169.254.169.254"),
        )
        .await;
    assert_eq!(refused(&r, "oidc.issuer"), NOT_ALLOWED, "link-local never");

    // Saved while allowed; refused at test connection and sign-in, open port or closed.
    let open = saved_while_allowed(
        &mut app,
        &admin,
        oidc("corp", &format!("https://localhost:{port}")),
    )
    .await;
    let closed = saved_while_allowed(
        &mut app,
        &admin,
        oidc("closed", &format!("https://localhost:{}", free_port())),
    )
    .await;
    let detail = |c: &Value| {
        let d = c["detail"].as_str().unwrap();
        d[..d.find(" (at ").unwrap_or(d.len())].to_string()
    };
    let a = test_step(&app, &admin, &open, "discovery").await;
    let b = test_step(&app, &admin, &closed, "discovery").await;
    assert_eq!(a["ok"], false);
    assert!(detail(&a).ends_with(NOT_ALLOWED), "{a}");
    assert_eq!(
        detail(&a),
        detail(&b),
        "open and closed ports look the same"
    );
    let r = browser_get(&app, "/auth/sso/acme/corp?next=/portal", &[]).await;
    assert!(
        location(&r).contains("error=sso_provider"),
        "{}",
        location(&r)
    );
    trap.assert_untouched();
    app.finish().await;
}

/// A certificate-shaped value (the SSO URL is refused before certificates matter).
fn cert() -> String {
    let mut der = vec![0x30, 0x82, 0x01, 0x00];
    der.extend(std::iter::repeat_n(7u8, 256));
    base64::engine::general_purpose::STANDARD.encode(der)
}

fn saml(name: &str, settings: Value) -> Value {
    json!({"name": name, "display_name": "Corp SAML", "kind": "saml", "saml": settings})
}

async fn saml_urls_on_private_addresses_are_refused(kind: Kind) {
    let (mut app, admin) = app(kind).await;
    let trap = Trap::new();
    let port = trap.port();

    for url in [
        "https://169.254.169.254/latest/meta-data/".to_string(),
        "https://10.0.0.1/metadata".to_string(),
        "https://192.168.0.1/metadata".to_string(),
        format!("https://127.0.0.1:{port}/metadata"),
        format!("https://localhost:{port}/metrics"),
    ] {
        let r = app
            .post(
                "/api/v1/idp",
                &admin,
                saml("corp", json!({"idp_metadata_url": url})),
            )
            .await;
        assert_eq!(refused(&r, "saml.idp_metadata_url"), NOT_ALLOWED, "{url}");
    }
    let r = app
        .post(
            "/api/v1/idp",
            &admin,
            saml(
                "corp",
                json!({"idp_metadata_url": format!("http://127.0.0.1:{port}/metrics")}),
            ),
        )
        .await;
    assert!(refused(&r, "saml.idp_metadata_url").contains("https"));
    for sso in [
        format!("https://127.0.0.1:{port}/sso"),
        "https://169.254.169.254/sso".to_string(),
        "https://10.0.0.1/sso".to_string(),
    ] {
        let r = app
            .post(
                "/api/v1/idp",
                &admin,
                saml(
                    "corp",
                    json!({"idp_entity_id": "https://idp.example/metadata", "idp_sso_url": sso, "idp_certificates": [cert()]}),
                ),
            )
            .await;
        assert_eq!(refused(&r, "saml.idp_sso_url"), NOT_ALLOWED, "{sso}");
    }

    // Saved while allowed: test connection does not reach the SSO URL, open port or closed.
    let manual = |name: &str, port: u16| {
        saml(
            name,
            json!({"idp_entity_id": "https://idp.example/metadata", "idp_sso_url": format!("https://localhost:{port}/sso"), "idp_certificates": [cert()]}),
        )
    };
    let open = saved_while_allowed(&mut app, &admin, manual("corp", port)).await;
    let closed = saved_while_allowed(&mut app, &admin, manual("closed", free_port())).await;
    let a = test_step(&app, &admin, &open, "single sign-on URL").await;
    let b = test_step(&app, &admin, &closed, "single sign-on URL").await;
    assert_eq!(a["ok"], false);
    assert!(
        a["detail"].as_str().unwrap().starts_with(NOT_ALLOWED),
        "{a}"
    );
    assert!(
        b["detail"].as_str().unwrap().starts_with(NOT_ALLOWED),
        "{b}"
    );
    assert!(!a.to_string().contains("HTTP"), "{a}");
    trap.assert_untouched();
    app.finish().await;
}

async fn ldap_servers_on_private_addresses_are_refused(kind: Kind) {
    let (mut app, admin) = app(kind).await;
    let trap = Trap::new();
    let port = trap.port();
    let ldap = |name: &str, url: String| {
        json!({"name": name, "display_name": "Directory", "kind": "ldap",
            "ldap": {"url": url, "user_dn_template": "uid={username},ou=people,dc=acme,dc=test"}})
    };
    for url in [
        format!("ldap://127.0.0.1:{port}"),
        format!("ldaps://localhost:{port}"),
        format!("ldap://[::1]:{port}"),
        "ldap://10.0.0.1".to_string(),
        "ldap://169.254.169.254:389".to_string(),
    ] {
        let r = app
            .post("/api/v1/idp", &admin, ldap("corp", url.clone()))
            .await;
        assert_eq!(refused(&r, "ldap.url"), NOT_ALLOWED, "{url}");
    }

    let open = saved_while_allowed(
        &mut app,
        &admin,
        ldap("corp", format!("ldap://localhost:{port}")),
    )
    .await;
    let closed = saved_while_allowed(
        &mut app,
        &admin,
        ldap("closed", format!("ldap://localhost:{}", free_port())),
    )
    .await;
    let a = test_step(&app, &admin, &open, "connect").await;
    let b = test_step(&app, &admin, &closed, "connect").await;
    assert_eq!(a["ok"], false);
    assert!(a["detail"].as_str().unwrap().ends_with(NOT_ALLOWED), "{a}");
    assert_eq!(
        a["detail"], b["detail"],
        "open and closed ports look the same"
    );

    // The sign-in form does not connect either.
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("username", "alice")
        .append_pair("password", "alice-pw")
        .finish();
    let r = app
        .raw(
            Request::builder()
                .method(Method::POST)
                .uri("/auth/ldap/acme/corp")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(body))
                .unwrap(),
        )
        .await;
    assert!(
        location(&r).contains("error=sso_provider"),
        "{}",
        location(&r)
    );
    trap.assert_untouched();
    app.finish().await;
}
