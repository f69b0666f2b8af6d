//! SCIM as a generic client sees it (issue 15): every discovery endpoint answers, responses
//! carry only what the served schemas describe, every failure is a SCIM error, PATCH answers
//! with what it stored, and `attributes`/`excludedAttributes` are honoured.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};
use crate::scim::scim;

both_stores!(
    scim_discovery_describes_every_returned_attribute,
    scim_errors_are_scim_errors_everywhere,
    scim_patch_answers_with_what_it_stored,
    scim_attribute_selection_and_filters,
);

const USER: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
const PATCH: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const ERROR: &str = "urn:ietf:params:scim:api:messages:2.0:Error";

async fn setup(kind: Kind) -> (TestApp, String) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let token = app.post("/api/v1/scim/token", &admin, json!({})).await.body["token"]
        .as_str()
        .unwrap()
        .to_string();
    (app, token)
}

fn ok(r: &Resp) -> &Value {
    assert!(r.status.is_success(), "{}: {}", r.status, r.text);
    &r.body
}

async fn user(app: &TestApp, token: &str, name: &str) -> String {
    let r = scim(
        app,
        Method::POST,
        "/scim/v2/Users",
        token,
        Some(json!({
        "schemas": [USER], "userName": name, "name": {"givenName": name, "familyName": "Test"},
        "emails": [{"value": format!("{name}@acme.test"), "primary": true, "type": "work"}]})),
    )
    .await;
    ok(&r)["id"].as_str().unwrap().to_string()
}

async fn patch(app: &TestApp, token: &str, path: &str, ops: Value) -> Resp {
    let body = json!({"schemas": [PATCH], "Operations": ops});
    scim(app, Method::PATCH, path, token, Some(body)).await
}

/// Every key of `resource` is an attribute `schema` describes (with its sub-attributes),
/// besides the common `schemas`, `id`, `externalId` and `meta`.
fn described(schema: &Value, resource: &Value) {
    let attrs = schema["attributes"].as_array().unwrap();
    for (key, value) in resource.as_object().unwrap() {
        if ["schemas", "id", "externalId", "meta"].contains(&key.as_str()) {
            continue;
        }
        let a = attrs
            .iter()
            .find(|a| a["name"] == key.as_str())
            .unwrap_or_else(|| panic!("{key} is returned but not described: {resource}"));
        let items: Vec<&Value> = match value {
            Value::Array(v) => v.iter().collect(),
            v => vec![v],
        };
        for item in items.iter().filter_map(|i| i.as_object()) {
            let subs = a["subAttributes"].as_array().unwrap();
            for sub in item.keys() {
                assert!(
                    subs.iter().any(|s| s["name"] == sub.as_str()),
                    "{key}.{sub} is returned but not described"
                );
            }
        }
    }
}

async fn scim_discovery_describes_every_returned_attribute(kind: Kind) {
    let (app, token) = setup(kind).await;
    let get = |path: String| {
        let (app, token) = (&app, &token);
        async move { scim(app, Method::GET, &path, token, None).await }
    };
    let listed = get("/scim/v2/Schemas".into()).await;
    assert_eq!(ok(&listed)["totalResults"], 2);
    for (id, rt) in [(USER, "User"), (GROUP, "Group")] {
        let one = get(format!("/scim/v2/Schemas/{id}")).await;
        assert_eq!(ok(&one)["id"], id);
        let t = get(format!("/scim/v2/ResourceTypes/{rt}")).await;
        assert_eq!(
            (ok(&t)["schema"].as_str(), t.body["endpoint"].as_str()),
            (Some(id), Some(format!("/{rt}s").as_str()))
        );
        for a in one.body["attributes"].as_array().unwrap() {
            for key in [
                "type",
                "multiValued",
                "required",
                "mutability",
                "returned",
                "uniqueness",
            ] {
                assert!(a.get(key).is_some(), "{id} {} lacks {key}", a["name"]);
            }
        }
    }
    let user_schema = get(format!("/scim/v2/Schemas/{USER}")).await.body;
    let group_schema = get(format!("/scim/v2/Schemas/{GROUP}")).await.body;
    let sub_names = |schema: &Value, attr: &str| -> Vec<String> {
        let a = schema["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == attr)
            .unwrap();
        a["subAttributes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(sub_names(&user_schema, "name").contains(&"givenName".to_string()));
    assert_eq!(
        sub_names(&user_schema, "groups"),
        ["value", "$ref", "display"]
    );
    assert_eq!(
        sub_names(&group_schema, "members"),
        ["value", "$ref", "type", "display"]
    );

    // A user in a group, a group with a member: what they answer is all described.
    let uid = user(&app, &token, "grace").await;
    let g = scim(&app, Method::POST, "/scim/v2/Groups", &token, Some(json!({
        "schemas": [GROUP], "displayName": "ML Research", "externalId": "okta-g1", "members": [{"value": uid}]}))).await;
    let gid = ok(&g)["id"].as_str().unwrap().to_string();
    let u = get(format!("/scim/v2/Users/{uid}")).await;
    assert_eq!(ok(&u)["groups"][0]["value"], gid.as_str());
    assert_eq!(
        u.body["name"],
        json!({"givenName": "grace", "familyName": "Test"})
    );
    described(&user_schema, &u.body);
    for r in ok(&get("/scim/v2/Groups".into()).await)["Resources"]
        .as_array()
        .unwrap()
    {
        described(&group_schema, r);
    }
    described(
        &group_schema,
        ok(&get(format!(
            "/scim/v2/Groups/{gid}?attributes=members.display,members.value"
        ))
        .await),
    );
    app.finish().await;
}

async fn scim_errors_are_scim_errors_everywhere(kind: Kind) {
    let (app, token) = setup(kind).await;
    let is_error = |r: &Resp, status: StatusCode| {
        assert_eq!(r.status, status, "{}", r.text);
        assert_eq!(r.headers[header::CONTENT_TYPE], "application/scim+json");
        assert_eq!(r.body["schemas"][0], ERROR, "{}", r.text);
        assert_eq!(r.body["status"], status.as_u16().to_string());
    };
    for path in [
        "/scim/v2/Nope",
        "/scim/v2/Users/x/y",
        "/scim/v2/Schemas/urn:nope",
        "/scim/v2/ResourceTypes/Device",
        "/scim/v2/Groups/missing",
    ] {
        is_error(
            &scim(&app, Method::GET, path, &token, None).await,
            StatusCode::NOT_FOUND,
        );
    }
    for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
        is_error(
            &scim(&app, m, "/scim/v2/Schemas", &token, Some(json!({}))).await,
            StatusCode::METHOD_NOT_ALLOWED,
        );
    }
    // A body that is not JSON, sent without a content type: invalidSyntax, not a plain 4xx.
    let raw = app
        .raw(
            Request::builder()
                .method(Method::POST)
                .uri("/scim/v2/Users")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::from("{not json"))
                .unwrap(),
        )
        .await;
    is_error(&raw, StatusCode::BAD_REQUEST);
    assert_eq!(raw.body["scimType"], "invalidSyntax");
    let uid = user(&app, &token, "ada").await;
    let path = format!("/scim/v2/Users/{uid}");
    for (ops, scim_type) in [
        (json!([{"op": "remove", "path": "active"}]), "mutability"),
        (
            json!([{"op": "replace", "path": "id", "value": "x"}]),
            "mutability",
        ),
        (json!([{"op": "remove"}]), "noTarget"),
        (json!([{"op": "copy", "path": "active"}]), "invalidSyntax"),
        (
            json!([{"op": "replace", "path": "emails[value eq \"nobody@x\"]", "value": {"value": "a@b.c"}}]),
            "noTarget",
        ),
        (
            json!([{"op": "replace", "path": "active", "value": "maybe"}]),
            "invalidValue",
        ),
        (
            json!([{"op": "replace", "path": "emails[value eq", "value": "x"}]),
            "invalidPath",
        ),
    ] {
        let r = patch(&app, &token, &path, ops.clone()).await;
        is_error(&r, StatusCode::BAD_REQUEST);
        assert_eq!(r.body["scimType"], scim_type, "{ops}");
    }
    // Nothing of those failed patches was stored.
    assert_eq!(
        ok(&scim(&app, Method::GET, &path, &token, None).await)["active"],
        true
    );
    app.finish().await;
}

async fn scim_patch_answers_with_what_it_stored(kind: Kind) {
    let (app, token) = setup(kind).await;
    let (u1, u2) = (
        user(&app, &token, "bob").await,
        user(&app, &token, "carol").await,
    );
    let g = scim(
        &app,
        Method::POST,
        "/scim/v2/Groups",
        &token,
        Some(json!({"schemas": [GROUP], "displayName": "Data Eng"})),
    )
    .await;
    let gpath = format!("/scim/v2/Groups/{}", ok(&g)["id"].as_str().unwrap());
    let r = patch(
        &app,
        &token,
        &gpath,
        json!([
        {"op": "replace", "path": "displayName", "value": "Data Engineering (EU)"},
        {"op": "add", "path": "externalId", "value": "entra-77"},
        {"op": "add", "path": "members", "value": [{"value": u1}]}]),
    )
    .await;
    assert_eq!(ok(&r)["displayName"], "Data Engineering (EU)");
    assert_eq!(r.body["externalId"], "entra-77");
    assert_eq!(
        r.body["members"],
        json!([{"value": u1, "$ref": format!("/scim/v2/Users/{u1}"), "type": "User"}])
    );
    let stored = scim(&app, Method::GET, &gpath, &token, None).await;
    assert_eq!(ok(&stored), &r.body, "the PATCH answer is the stored group");
    let r = patch(
        &app,
        &token,
        &gpath,
        json!([{"op": "replace", "path": "members", "value": [{"value": u2}]},
        {"op": "replace", "path": "externalId", "value": "entra-78"}]),
    )
    .await;
    let members: Vec<&str> = ok(&r)["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["value"].as_str().unwrap())
        .collect();
    assert_eq!(
        (members, r.body["externalId"].as_str()),
        (vec![u2.as_str()], Some("entra-78"))
    );
    // The Switchyard group keeps its name: access rules and queues refer to it.
    let admin = app.login("acme", "admin").await;
    assert!(app
        .get("/api/v1/groups", &admin)
        .await
        .text
        .contains("\"data-eng\""));

    // Entra's user PATCH: capitalised ops, a string boolean, a filtered email path, and
    // attributes Switchyard does not keep.
    let upath = format!("/scim/v2/Users/{u1}");
    let r = patch(&app, &token, &upath, json!([
        {"op": "Replace", "path": "emails[type eq \"work\"].value", "value": "bob.new@acme.test"},
        {"op": "Replace", "path": "name.familyName", "value": "Builder"},
        {"op": "Add", "path": "externalId", "value": "00u42"},
        {"op": "Replace", "path": "displayName", "value": "Bob Builder"},
        {"op": "Add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department", "value": "R&D"},
        {"op": "Replace", "path": "active", "value": "False"}])).await;
    assert_eq!(ok(&r)["emails"], json!([{"value": "bob.new@acme.test"}]));
    assert_eq!(
        (
            r.body["name"]["familyName"].as_str(),
            r.body["externalId"].as_str()
        ),
        (Some("Builder"), Some("00u42"))
    );
    assert_eq!(
        (r.body["displayName"].as_str(), r.body["active"].as_bool()),
        (Some("Bob Builder"), Some(false))
    );
    assert_eq!(
        ok(&scim(&app, Method::GET, &upath, &token, None).await),
        &r.body
    );
    let user = app.get(&format!("/api/v1/users/{u1}"), &admin).await;
    assert_eq!(
        (
            user.body["disabled"].as_bool(),
            user.body["display_name"].as_str()
        ),
        (Some(true), Some("Bob Builder"))
    );
    // Removing what was added leaves it unassigned.
    let r = patch(
        &app,
        &token,
        &upath,
        json!([{"op": "remove", "path": "externalId"}, {"op": "remove", "path": "displayName"}]),
    )
    .await;
    assert!(
        ok(&r).get("externalId").is_none() && r.body.get("displayName").is_none(),
        "{}",
        r.text
    );
    app.finish().await;
}

async fn scim_attribute_selection_and_filters(kind: Kind) {
    let (app, token) = setup(kind).await;
    let uid = user(&app, &token, "dana").await;
    let g = scim(&app, Method::POST, "/scim/v2/Groups", &token, Some(json!({
        "schemas": [GROUP], "displayName": "Ops", "externalId": "x-ops", "members": [{"value": uid}]}))).await;
    let gid = ok(&g)["id"].as_str().unwrap().to_string();
    let get = |path: String| {
        let (app, token) = (&app, &token);
        async move { scim(app, Method::GET, &path, token, None).await }
    };
    let one = get(format!("/scim/v2/Groups/{gid}?attributes=externalId")).await;
    assert_eq!(
        ok(&one),
        &json!({"schemas": [GROUP], "id": gid, "externalId": "x-ops"})
    );
    let one = get(format!(
        "/scim/v2/Groups/{gid}?excludedAttributes=members,meta"
    ))
    .await;
    assert!(
        ok(&one).get("members").is_none()
            && one.body.get("meta").is_none()
            && one.body["displayName"] == "Ops"
    );
    let listed = get("/scim/v2/Groups?attributes=externalId,displayName".into()).await;
    assert_eq!(
        ok(&listed)["Resources"][0],
        json!({"schemas": [GROUP], "id": gid, "externalId": "x-ops", "displayName": "Ops"})
    );
    let listed = get("/scim/v2/Users?excludedAttributes=emails,groups".into()).await;
    let u = &ok(&listed)["Resources"][0];
    assert!(u.get("emails").is_none() && u.get("groups").is_none() && u["userName"] == "dana");
    let searched = scim(&app, Method::POST, "/scim/v2/.search", &token, Some(json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "attributes": ["externalId"], "filter": "externalId eq \"x-ops\""}))).await;
    assert_eq!(ok(&searched)["totalResults"], 1);
    assert_eq!(
        searched.body["Resources"][0],
        json!({"schemas": [GROUP], "id": gid, "externalId": "x-ops"})
    );

    // Filters beyond eq, and paging.
    user(&app, &token, "dave").await;
    let found = get("/scim/v2/Users?filter=userName%20sw%20%22da%22%20and%20emails.value%20co%20%22acme%22&count=1".into()).await;
    assert_eq!(
        (
            ok(&found)["totalResults"].as_u64(),
            found.body["itemsPerPage"].as_u64()
        ),
        (Some(2), Some(1))
    );
    let found = get("/scim/v2/Groups?filter=displayName%20eq%20%22ops%22".into()).await;
    assert_eq!(
        ok(&found)["Resources"][0]["id"],
        gid.as_str(),
        "displayName compares case-insensitively"
    );
    let bad = get("/scim/v2/Users?filter=password%20eq%20%22x%22".into()).await;
    assert_eq!(
        (bad.status, bad.body["scimType"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalidFilter"))
    );
    app.finish().await;
}
