//! SCIM 2.0 provisioning: an IdP pushes users and groups with the tenant's bearer token,
//! deprovisions them, and a provisioned user's first SSO sign-in links to the account.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};

both_stores!(scim_provisions_users_and_groups_and_deprovisions);

pub(crate) async fn scim(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Resp {
    let mut b = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    let req = match body {
        Some(v) => {
            b = b.header(header::CONTENT_TYPE, "application/scim+json");
            b.body(Body::from(v.to_string())).unwrap()
        }
        None => b.body(Body::empty()).unwrap(),
    };
    app.raw(req).await
}

async fn scim_provisions_users_and_groups_and_deprovisions(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    app.seed_tenant("globex").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let refused = app.post("/api/v1/scim/token", &member, json!({})).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let issued = app.post("/api/v1/scim/token", &admin, json!({})).await;
    assert_eq!(issued.status, StatusCode::CREATED, "{}", issued.text);
    let token = issued.body["token"].as_str().unwrap().to_string();
    let other = app.login("globex", "admin").await;
    let other_token = app.post("/api/v1/scim/token", &other, json!({})).await.body["token"]
        .as_str()
        .unwrap()
        .to_string();

    // No token, a wrong token, or an ordinary API token: a SCIM 401.
    let none = scim(&app, Method::GET, "/scim/v2/Users", "nope", None).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert_eq!(none.headers[header::CONTENT_TYPE], "application/scim+json");
    assert_eq!(
        none.body["schemas"][0],
        "urn:ietf:params:scim:api:messages:2.0:Error"
    );
    assert_eq!(
        scim(&app, Method::GET, "/scim/v2/Users", &admin, None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );

    let created = scim(&app, Method::POST, "/scim/v2/Users", &token, Some(json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
        "userName": "Grace.Hopper", "externalId": "00u1", "name": {"givenName": "Grace", "familyName": "Hopper"},
        "emails": [{"value": "grace@acme.test", "primary": true}], "active": true
    }))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let uid = created.body["id"].as_str().unwrap().to_string();
    assert_eq!(created.body["userName"], "grace.hopper");
    assert_eq!(created.body["displayName"], "Grace Hopper");
    let dup = scim(
        &app,
        Method::POST,
        "/scim/v2/Users",
        &token,
        Some(json!({"userName": "grace.hopper"})),
    )
    .await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    assert_eq!(dup.body["scimType"], "uniqueness");

    let found = scim(
        &app,
        Method::GET,
        "/scim/v2/Users?filter=userName%20eq%20%22grace.hopper%22",
        &token,
        None,
    )
    .await;
    assert_eq!(found.body["totalResults"], 1, "{}", found.text);
    assert_eq!(found.body["Resources"][0]["id"], uid.as_str());
    let bad_filter = scim(
        &app,
        Method::GET,
        "/scim/v2/Users?filter=userName%20xx%20%22g%22",
        &token,
        None,
    )
    .await;
    assert_eq!(bad_filter.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_filter.body["scimType"], "invalidFilter");
    // Another tenant's token sees nothing of acme.
    let theirs = scim(
        &app,
        Method::GET,
        &format!("/scim/v2/Users/{uid}"),
        &other_token,
        None,
    )
    .await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND);

    let group = scim(&app, Method::POST, "/scim/v2/Groups", &token, Some(json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "ML Research", "members": [{"value": uid}]
    }))).await;
    assert_eq!(group.status, StatusCode::CREATED, "{}", group.text);
    let gid = group.body["id"].as_str().unwrap().to_string();
    let members = app
        .get(&format!("/api/v1/groups/{gid}/members"), &admin)
        .await;
    assert_eq!(members.body[0]["username"], "grace.hopper");
    let groups = app.get("/api/v1/groups", &admin).await;
    assert!(groups.text.contains("\"ml-research\""), "{}", groups.text);

    // Removing the member through PATCH (Okta's and Entra's form).
    let patch = scim(
        &app,
        Method::PATCH,
        &format!("/scim/v2/Groups/{gid}"),
        &token,
        Some(json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "remove", "path": format!("members[value eq \"{uid}\"]")}]
        })),
    )
    .await;
    assert_eq!(patch.status, StatusCode::OK, "{}", patch.text);
    // No members: the attribute is unassigned (RFC 7643 §2.5).
    assert!(patch.body.get("members").is_none(), "{}", patch.text);
    let add = scim(
        &app,
        Method::PATCH,
        &format!("/scim/v2/Groups/{gid}"),
        &token,
        Some(json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "add", "path": "members", "value": [{"value": uid}]}]
        })),
    )
    .await;
    assert_eq!(add.body["members"][0]["value"], uid.as_str());

    // Deactivation disables the account; deletion removes it.
    let off = scim(
        &app,
        Method::PATCH,
        &format!("/scim/v2/Users/{uid}"),
        &token,
        Some(json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "replace", "value": {"active": false}}]
        })),
    )
    .await;
    assert_eq!(off.status, StatusCode::OK, "{}", off.text);
    assert_eq!(off.body["active"], false);
    let user = app.get(&format!("/api/v1/users/{uid}"), &admin).await;
    assert_eq!(user.body["disabled"], true);
    let gone = scim(
        &app,
        Method::DELETE,
        &format!("/scim/v2/Users/{uid}"),
        &token,
        None,
    )
    .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get(&format!("/api/v1/users/{uid}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let audit = app.get("/api/v1/audit?actor=scim", &admin).await;
    let actions: Vec<&str> = audit.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert!(
        actions.contains(&"user.create")
            && actions.contains(&"user.delete")
            && actions.contains(&"group.member_remove"),
        "{actions:?}"
    );

    // A revoked SCIM token stops working at once.
    assert_eq!(
        app.delete("/api/v1/scim/token", &admin).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        scim(&app, Method::GET, "/scim/v2/Users", &token, None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    app.finish().await;
}
