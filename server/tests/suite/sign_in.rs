//! What the sign-in suites (OIDC, SAML, LDAP) share: starting a test IdP written for Node,
//! playing the browser against the router (cookies in, `Set-Cookie` and `Location` out), and the
//! group lookups and "refused, and no session" check every negative case uses.

use std::process::Stdio;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::common::{Resp, TestApp};

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `node end2end/idp/{script}` on a free port (passed as `{port_env}`) and waits for its
/// "ready at" line; returns the process (killed on drop) and the port.
pub async fn spawn_node_idp(script: &str, port_env: &str, env: &[(&str, String)]) -> (Child, u16) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let port = free_port();
    let mut cmd = Command::new("node");
    cmd.arg(format!("end2end/idp/{script}"))
        .current_dir(root)
        .env(port_env, port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("node runs {script} (npm ci installs its packages): {e}"));
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("ready at") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(ready, "{script} did not start");
    (child, port)
}

/// The value a response sets for cookie `name` (a cleared cookie does not count).
pub fn set_cookie(resp: &Resp, name: &str) -> Option<String> {
    resp.headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")) && !v.starts_with(&format!("{name}=;")))
        .map(|v| v.split(';').next().unwrap()[name.len() + 1..].to_string())
}

pub fn location(resp: &Resp) -> String {
    resp.headers[header::LOCATION].to_str().unwrap().to_string()
}

/// A browser's GET with these cookies.
pub async fn browser_get(app: &TestApp, path: &str, cookies: &[(&str, &str)]) -> Resp {
    let mut b = Request::builder().method(Method::GET).uri(path);
    let cookie = cookies
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    if !cookie.is_empty() {
        b = b.header(header::COOKIE, cookie);
    }
    app.raw(b.body(Body::empty()).unwrap()).await
}

/// A refused sign-in: back to the sign-in page with `error={code}`, no session cookie, and the
/// page shows the message.
pub async fn assert_refused(app: &TestApp, r: &Resp, code: &str) {
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let loc = location(r);
    assert!(loc.contains(&format!("error={code}")), "{loc}");
    assert!(
        set_cookie(r, "sy_session").is_none(),
        "a refused sign-in sets no session"
    );
    let page = browser_get(app, &loc, &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("role=\"alert\""), "{}", page.text);
}

pub async fn group(app: &TestApp, admin: &str, name: &str) -> String {
    let g = app
        .post("/api/v1/groups", admin, json!({ "name": name }))
        .await;
    assert_eq!(g.status, StatusCode::CREATED, "{}", g.text);
    g.body["id"].as_str().unwrap().to_string()
}

pub async fn members(app: &TestApp, admin: &str, gid: &str) -> Vec<String> {
    let r = app
        .get(&format!("/api/v1/groups/{gid}/members"), admin)
        .await;
    r.body
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["username"].as_str().unwrap().to_string())
        .collect()
}

/// The reasons of the tenant's failed sign-ins in the audit log, newest first.
pub async fn failure_reasons(app: &TestApp, admin: &str) -> Vec<String> {
    let r = app
        .get("/api/v1/audit?action=auth.login_failed&limit=100", admin)
        .await;
    r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["summary"]["reason"].as_str().unwrap_or("").to_string())
        .collect()
}
