//! The `switchyard admin` commands, run as the real binary.

use std::process::Command;

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(admin_commands_create_reset_and_verify);

async fn login(app: &TestApp, pw: &str) -> u16 {
    let body = serde_json::json!({"tenant": "platform", "username": "ops", "password": pw});
    app.call(
        axum::http::Method::POST,
        "/api/v1/auth/login",
        None,
        Some(body),
    )
    .await
    .status
    .as_u16()
}

fn switchyard(url: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("--database-url")
        .arg(url)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

async fn admin_commands_create_reset_and_verify(kind: Kind) {
    let app = TestApp::new(kind).await;
    let url = app.db.url.clone();
    let (ok, out) = switchyard(
        &url,
        &[
            "admin",
            "create-admin",
            "--tenant",
            "platform",
            "--username",
            "ops",
            "--password",
            "first-password-1",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(login(&app, "first-password-1").await, 200);
    let (ok, out) = switchyard(
        &url,
        &[
            "admin",
            "create-admin",
            "--tenant",
            "platform",
            "--username",
            "x",
            "--password",
            "short",
        ],
    );
    assert!(!ok && out.contains("at least 12"), "{out}");

    let (ok, out) = switchyard(
        &url,
        &[
            "admin",
            "reset-password",
            "--tenant",
            "platform",
            "--username",
            "ops",
            "--password",
            "second-password-2",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(login(&app, "first-password-1").await, 401);
    assert_eq!(login(&app, "second-password-2").await, 200);

    let (ok, out) = switchyard(&url, &["admin", "audit-verify"]);
    assert!(ok && out.contains("1 chains checked, 0 broken"), "{out}");
    sqlx::query("UPDATE audit_log SET actor_name = 'someone-else' WHERE seq = 2")
        .execute(&app.store().pool)
        .await
        .unwrap();
    let (ok, out) = switchyard(&url, &["admin", "audit-verify"]);
    assert!(!ok, "tampering makes it fail: {out}");
    assert!(
        out.contains("BROKEN") && out.contains("entry 2 was changed"),
        "{out}"
    );
    app.finish().await;
}
