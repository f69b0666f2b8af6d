//! LDAP sign-in against a real OpenLDAP `slapd` (Debian), started per test from
//! `end2end/idp/ldap.sh` with a seeded directory: direct bind and search-then-bind, groups from
//! `memberOf` and from a group search, wrong and empty passwords, filter injection, and a user
//! removed from a directory group losing the Switchyard group at the next sign-in.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};
use crate::sign_in::{group, location, members, set_cookie};

both_stores!(
    ldap_direct_bind_signs_in_and_maps_member_of,
    ldap_search_then_bind_follows_directory_groups
);

struct Slapd {
    dir: tempfile::TempDir,
    port: u16,
}

fn script() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../end2end/idp/ldap.sh").to_string()
}

impl Slapd {
    async fn start() -> Slapd {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let out = tokio::process::Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(port.to_string())
            .env("LDAP_DIR", dir.path().join("slapd"))
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "slapd did not start (bootstrap installs Debian's slapd): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Slapd { dir, port }
    }

    async fn run(&self, args: &[&str]) {
        let out = tokio::process::Command::new("bash")
            .arg(script())
            .args(args)
            .env("LDAP_DIR", self.dir.path().join("slapd"))
            .env("LDAP_PORT", self.port.to_string())
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(script())
            .arg("stop")
            .env("LDAP_DIR", self.dir.path().join("slapd"))
            .output();
    }
}

async fn provider(app: &TestApp, admin: &str, ldap: Value, secret: Option<&str>) -> String {
    let mut body = json!({"name": "corp-ldap", "display_name": "Corp Directory", "kind": "ldap", "ldap": ldap});
    if let Some(s) = secret {
        body["client_secret"] = json!(s);
    }
    let r = app.post("/api/v1/idp", admin, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.body["id"].as_str().unwrap().to_string()
}

async fn form_login(app: &TestApp, username: &str, password: &str) -> Resp {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("username", username)
        .append_pair("password", password)
        .append_pair("next", "/portal")
        .finish();
    let req = Request::builder()
        .method(Method::POST)
        .uri("/auth/ldap/acme/corp-ldap")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .unwrap();
    app.raw(req).await
}

async fn me(app: &TestApp, session: &str) -> Value {
    let req = Request::builder()
        .uri("/api/v1/me")
        .header(header::COOKIE, format!("sy_session={session}"))
        .body(Body::empty())
        .unwrap();
    app.raw(req).await.body
}

async fn ldap_direct_bind_signs_in_and_maps_member_of(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let slapd = Slapd::start().await;
    let ml = group(&app, &admin, "ml-research").await;
    let pa = group(&app, &admin, "platform-admins").await;
    provider(
        &app,
        &admin,
        json!({"url": slapd.url(), "user_dn_template": "uid={username},ou=people,dc=acme,dc=test"}),
        None,
    )
    .await;
    let options = app
        .call(Method::GET, "/api/v1/sign-in/acme", None, None)
        .await;
    assert_eq!(
        options.body["providers"][0]["start_url"],
        "/auth/ldap/acme/corp-ldap"
    );

    let ok = form_login(&app, "alice", "alice-pw").await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.text);
    assert_eq!(location(&ok), "/portal");
    let session = set_cookie(&ok, "sy_session").expect("a session");
    let who = me(&app, &session).await;
    assert_eq!(who["username"], "alice");
    assert_eq!(who["display_name"], "Alice Admin");
    assert_eq!(who["email"], "alice@acme.test");
    assert_eq!(members(&app, &admin, &ml).await, ["alice"]);
    assert_eq!(members(&app, &admin, &pa).await, ["alice"]);

    for (user, pw) in [
        ("alice", "wrong-pw"),
        ("alice", ""),
        ("*", "alice-pw"),
        ("alice)(uid=*", "alice-pw"),
        ("nobody", "x"),
    ] {
        let r = form_login(&app, user, pw).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
        assert!(
            location(&r).contains("error=invalid"),
            "{user}/{pw}: {}",
            location(&r)
        );
        assert!(
            set_cookie(&r, "sy_session").is_none(),
            "{user}/{pw} got a session"
        );
    }
    let failed = app
        .get("/api/v1/audit?action=auth.login_failed", &admin)
        .await;
    assert!(failed.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["summary"]["method"] == "ldap"
            && e["summary"]["reason"] == "invalid username or password"));
    app.finish().await;
}

async fn ldap_search_then_bind_follows_directory_groups(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let slapd = Slapd::start().await;
    let ml = group(&app, &admin, "ml-research").await;
    let id = provider(
        &app,
        &admin,
        json!({
            "url": slapd.url(),
            "base_dn": "ou=people,dc=acme,dc=test",
            "bind_dn": "cn=switchyard,ou=services,dc=acme,dc=test",
            "group_lookup": "search",
            "group_base_dn": "ou=groups,dc=acme,dc=test"
        }),
        Some("svc-pw"),
    )
    .await;
    let checks = app
        .post(&format!("/api/v1/idp/{id}/test"), &admin, json!({}))
        .await;
    let steps: Vec<(&str, bool)> = checks
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["step"].as_str().unwrap(), c["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [
            ("connect", true),
            ("service account bind", true),
            ("base DN", true)
        ],
        "{}",
        checks.text
    );

    let first = form_login(&app, "bob", "bob-pw").await;
    let session = set_cookie(&first, "sy_session").expect("bob signs in");
    assert_eq!(me(&app, &session).await["username"], "bob");
    assert_eq!(members(&app, &admin, &ml).await, ["bob"]);

    // The directory admin removes bob from the group; his next sign-in removes it here.
    slapd.run(&["remove-member", "ml-research", "bob"]).await;
    let again = form_login(&app, "bob", "bob-pw").await;
    assert!(set_cookie(&again, "sy_session").is_some());
    assert!(members(&app, &admin, &ml).await.is_empty());
    let removed = app
        .get("/api/v1/audit?action=group.member_remove", &admin)
        .await;
    assert_eq!(removed.body["items"][0]["actor_name"], "idp:corp-ldap");

    // A wrong service password: sign-in fails closed, and "test connection" says where.
    let put = app
        .call(
            Method::PUT,
            &format!("/api/v1/idp/{id}"),
            Some(&admin),
            Some(json!({"name": "corp-ldap", "display_name": "Corp Directory", "kind": "ldap", "client_secret": "wrong", "ldap": {
                "url": slapd.url(), "base_dn": "ou=people,dc=acme,dc=test",
                "bind_dn": "cn=switchyard,ou=services,dc=acme,dc=test"}})),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text);
    let r = form_login(&app, "bob", "bob-pw").await;
    assert!(
        location(&r).contains("error=sso_provider"),
        "{}",
        location(&r)
    );
    assert!(set_cookie(&r, "sy_session").is_none());
    let checks = app
        .post(&format!("/api/v1/idp/{id}/test"), &admin, json!({}))
        .await;
    assert_eq!(checks.body[1]["step"], "service account bind");
    assert_eq!(checks.body[1]["ok"], false);
    app.finish().await;
}
