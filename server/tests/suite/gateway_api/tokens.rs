//! Gateway tokens: issued for the caller on a gateway, the secret shown once and stored only
//! as its hash, endpoint tokens limited to endpoints the caller may use, listed without
//! secrets, revoked by their owner or a tenant admin (404 for anyone else), audited.

use axum::http::StatusCode;
use serde_json::json;

use super::{audited, created, id, invalid, names, setup};
use crate::both_stores;
use crate::common::{Kind, TestApp, PASSWORD};

both_stores!(gateway_api_tokens_show_their_secret_once);

async fn gateway_api_tokens_show_their_secret_once(kind: Kind) {
    let app = TestApp::new(kind).await;
    let (admin, member, research, finance, _) = setup(&app).await;
    let other = app.login("globex", "admin").await;
    let r = app
        .post(
            "/api/v1/users",
            &admin,
            json!({"username": "eve", "password": PASSWORD}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let eve = app.login("acme", "eve").await;
    let gw = id(&created(&app, &admin, "/api/v1/gateways", json!({"name": "prod"})).await);
    let globex_gw = id(&created(&app, &other, "/api/v1/gateways", json!({"name": "prod"})).await);
    let mine = id(&created(
        &app,
        &member,
        "/api/v1/endpoints",
        json!({"project_id": research, "name": "mine"}),
    )
    .await);
    let hidden = id(&created(
        &app,
        &admin,
        "/api/v1/endpoints",
        json!({"project_id": finance, "name": "hidden"}),
    )
    .await);
    let issue = format!("/api/v1/gateways/{gw}/tokens");

    // A user token: the secret once, 90 days by default.
    let t = created(&app, &member, &issue, json!({"name": "laptop"})).await;
    let secret = t["token"].as_str().unwrap().to_string();
    assert!(secret.starts_with("syg_") && secret.len() > 40, "{secret}");
    assert_eq!(t["prefix"].as_str().unwrap(), &secret[..12]);
    assert_eq!(
        (t["kind"].as_str(), t["gateway_name"].as_str()),
        (Some("user"), Some("prod"))
    );
    let days = (t["expires_at"].as_i64().unwrap() - t["created_at"].as_i64().unwrap()) / 86_400_000;
    assert_eq!(days, 90);
    let listed = app.get("/api/v1/gateway-tokens", &member).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(names(&listed.body), ["laptop"]);
    assert!(!listed.text.contains(&secret) && !listed.text.contains("token_hash"));
    assert!(listed.body[0].get("token").is_none());
    let stored = format!("SELECT COUNT(*) FROM gateway_tokens WHERE token_hash = '{secret}'");
    assert_eq!(app.count(&stored).await, 0, "only the hash is stored");
    let digest = switchyard::identity::secret::digest(&secret);
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM gateway_tokens WHERE token_hash = '{digest}'"
        ))
        .await,
        1
    );
    let leaked = format!("SELECT COUNT(*) FROM audit_log WHERE summary LIKE '%{secret}%'");
    assert_eq!(app.count(&leaked).await, 0, "the secret is not audited");

    // An endpoint token names endpoints the caller may use.
    let e = created(
        &app,
        &member,
        &issue,
        json!({"name": "svc", "endpoint_ids": [mine], "expires_in_days": 7}),
    )
    .await;
    assert_eq!(
        (e["kind"].as_str(), e["endpoint_ids"].clone()),
        (Some("endpoint"), json!([mine]))
    );
    invalid(
        &app.post(&issue, &member, json!({"name": "x", "endpoint_ids": []}))
            .await,
        "endpoint_ids",
    );
    invalid(
        &app.post(
            &issue,
            &member,
            json!({"name": "x", "endpoint_ids": [hidden]}),
        )
        .await,
        "endpoint_ids",
    );
    invalid(
        &app.post(
            &issue,
            &member,
            json!({"name": "x", "endpoint_ids": ["nope"]}),
        )
        .await,
        "endpoint_ids",
    );
    for days in [0, 366, -1] {
        invalid(
            &app.post(
                &issue,
                &member,
                json!({"name": "x", "expires_in_days": days}),
            )
            .await,
            "expires_in_days",
        );
    }
    invalid(
        &app.post(&issue, &member, json!({"name": ""})).await,
        "name",
    );
    let r = app
        .post(
            &format!("/api/v1/gateways/{globex_gw}/tokens"),
            &member,
            json!({"name": "x"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);

    // Only tenant admins list everyone's.
    assert_eq!(
        app.get("/api/v1/gateway-tokens?all=true", &member)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let all = app.get("/api/v1/gateway-tokens?all=true", &admin).await;
    assert_eq!(all.body.as_array().unwrap().len(), 2, "{}", all.text);
    assert!(names(&app.get("/api/v1/gateway-tokens", &admin).await.body).is_empty());
    assert!(names(
        &app.get("/api/v1/gateway-tokens?all=true", &other)
            .await
            .body
    )
    .is_empty());

    // Revoking: another member gets 404; the owner and tenant admins may.
    let tpath = format!("/api/v1/gateway-tokens/{}", id(&t));
    assert_eq!(app.delete(&tpath, &eve).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.delete(&tpath, &other).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&tpath, &member).await.status,
        StatusCode::NO_CONTENT
    );
    let epath = format!("/api/v1/gateway-tokens/{}", id(&e));
    assert_eq!(
        app.delete(&epath, &admin).await.status,
        StatusCode::NO_CONTENT
    );
    let after = app.get("/api/v1/gateway-tokens", &member).await.body;
    assert!(
        after
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["revoked_at"].is_i64()),
        "{after}"
    );
    assert_eq!(audited(&app, "gateway_token.issue").await, 2);
    assert_eq!(audited(&app, "gateway_token.revoke").await, 2);
    app.finish().await;
}
