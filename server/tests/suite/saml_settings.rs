//! SAML provider settings against the real test IdP: validated at the field, the IdP's
//! metadata read by URL, and "test connection" that says what works and what does not.

use std::time::Duration;

use axum::http::{header, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};
use crate::saml::*;

both_stores!(saml_settings_are_validated_and_tested);

async fn saml_settings_are_validated_and_tested(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    app.seed_tenant("globex").await;
    let admin = app.login("acme", "admin").await;
    let idp = SamlIdp::start(json!([sp("acme")])).await;
    let save = |saml: Value| json!({"name": "corp", "display_name": "Corp SAML", "kind": "saml", "saml": saml});
    let field = |r: &Resp, name: &str| {
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
        assert_eq!(r.headers[header::CONTENT_TYPE], "application/problem+json");
        assert!(
            r.body["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"] == name),
            "{name}: {}",
            r.text
        );
    };
    let r = app
        .post(
            "/api/v1/idp",
            &admin,
            save(json!({"idp_metadata_url": format!("{}/nothing-here", idp.base)})),
        )
        .await;
    field(&r, "saml.idp_metadata_url");
    // What an arbitrary URL answered is not echoed.
    assert!(
        r.text.contains("did not answer with SAML IdP metadata"),
        "{}",
        r.text
    );
    assert!(!r.text.contains("404"), "{}", r.text);
    let r = app
        .post(
            "/api/v1/idp",
            &admin,
            save(json!({"idp_metadata_xml": "<html>not metadata</html>"})),
        )
        .await;
    field(&r, "saml.idp_metadata_xml");
    let r = app
        .post(
            "/api/v1/idp",
            &admin,
            save(json!({"idp_entity_id": "https://idp.example", "idp_sso_url": "ftp://x", "idp_certificates": ["not a cert"]})),
        )
        .await;
    field(&r, "saml.idp_sso_url");
    field(&r, "saml.idp_certificates");
    let r = app
        .post(
            "/api/v1/idp",
            &admin,
            json!({"name": "corp", "display_name": "Corp", "kind": "saml"}),
        )
        .await;
    field(&r, "saml");

    // By hand, with the PEM certificate, works as well as metadata.
    let pem = idp
        .http
        .get(format!("{}/__test/cert", idp.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let r = app
        .post(
            "/api/v1/idp",
            &admin,
            save(json!({
                "idp_entity_id": format!("{}/metadata", idp.base),
                "idp_sso_url": format!("{}/sso", idp.base),
                "idp_certificates": [pem],
            })),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let id = r.body["id"].as_str().unwrap().to_string();
    let checks = app
        .post(&format!("/api/v1/idp/{id}/test"), &admin, json!({}))
        .await;
    assert_eq!(checks.status, StatusCode::OK, "{}", checks.text);
    let steps: Vec<(String, bool)> = checks
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["step"].as_str().unwrap().to_string(),
                c["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(steps.iter().all(|(_, ok)| *ok), "{}", checks.text);
    assert!(steps.iter().any(|(s, _)| s == "single sign-on URL"));
    let session = sign_in(&app, &idp, "acme", "bob", "bob-pw").await;
    assert!(!session.is_empty());

    // The IdP goes away: test connection says which step failed.
    drop(idp);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let checks = app
        .post(&format!("/api/v1/idp/{id}/test"), &admin, json!({}))
        .await;
    let sso = checks
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["step"] == "single sign-on URL")
        .unwrap()
        .clone();
    assert_eq!(sso["ok"], false, "{}", checks.text);

    // Another tenant sees nothing of it.
    let globex = app.login("globex", "admin").await;
    let other = app.get(&format!("/api/v1/idp/{id}"), &globex).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND);
    let audit = app.get("/api/v1/audit?action=idp.create", &admin).await;
    assert_eq!(
        audit.body["items"][0]["summary"]["saml_idp_certificates"], 1,
        "{}",
        audit.text
    );
    app.finish().await;
}
