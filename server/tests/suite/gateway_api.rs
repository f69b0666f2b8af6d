//! The gateway's REST API: endpoints seen, used and changed along access rules; gateways with
//! ports from the configured range; routes that publish endpoints under stable URLs; gateway
//! tokens whose secret is shown once and stored hashed; every write audited.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, Resp, TestApp};

both_stores!(
    gateway_api_endpoints_follow_access_rules,
    gateway_api_gateways_get_distinct_ports_until_the_range_is_spent,
    gateway_api_routes_publish_and_switch_endpoints
);

// Gateway tokens.
mod tokens;

pub(crate) fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

pub(crate) async fn created(app: &TestApp, token: &str, path: &str, body: Value) -> Value {
    let r = app.post(path, token, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{path}: {}", r.text);
    r.body
}

/// A 422 naming `field`.
pub(crate) fn invalid(r: &Resp, field: &str) {
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    let fields: Vec<&str> = r.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert!(fields.contains(&field), "{field} not in {}", r.text);
}

pub(crate) fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect()
}

pub(crate) async fn audited(app: &TestApp, action: &str) -> i64 {
    app.count(&format!(
        "SELECT COUNT(*) FROM audit_log WHERE action = '{action}'"
    ))
    .await
}

/// acme (admin, member in group `team` with `use` on project `research`) and globex; returns
/// (admin, member, research, finance, team).
pub(crate) async fn setup(app: &TestApp) -> (String, String, String, String, String) {
    app.seed_tenant("acme").await;
    app.seed_tenant("globex").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let research = id(&created(app, &admin, "/api/v1/projects", json!({"name": "research"})).await);
    let finance = id(&created(app, &admin, "/api/v1/projects", json!({"name": "finance"})).await);
    let team = id(&created(app, &admin, "/api/v1/groups", json!({"name": "team"})).await);
    let member_id = app.user_id(&admin, "member").await;
    created(
        app,
        &admin,
        &format!("/api/v1/groups/{team}/members"),
        json!({ "user_id": member_id }),
    )
    .await;
    created(app, &admin, "/api/v1/access-rules", json!({"group_id": team, "permission": "use", "resource_kind": "project", "project_id": research})).await;
    (admin, member, research, finance, team)
}

async fn gateway_api_endpoints_follow_access_rules(kind: Kind) {
    let app = TestApp::new(kind).await;
    let (admin, member, research, finance, team) = setup(&app).await;
    let other = app.login("globex", "admin").await;

    // A member creates an endpoint in a project they may use; they own it.
    let llama = created(&app, &member, "/api/v1/endpoints", json!({"project_id": research, "name": "llama-3", "targets": ["10.0.0.7:8000", "Vllm-0.svc:08001"]})).await;
    let llama_id = id(&llama);
    assert_eq!(llama["owner_id"], app.user_id(&admin, "member").await);
    let addresses: Vec<&str> = llama["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["address"].as_str().unwrap())
        .collect();
    assert_eq!(addresses, ["10.0.0.7:8000", "vllm-0.svc:8001"]);
    assert_eq!(llama["urls"], json!([]), "not routed yet");

    // Once a tenant admin routes it, the member sees its URL.
    let gw = created(&app, &admin, "/api/v1/gateways", json!({"name": "prod"})).await;
    let port = gw["port"].as_i64().unwrap();
    created(
        &app,
        &admin,
        "/api/v1/routes",
        json!({"gateway_id": id(&gw), "path_prefix": "/llama", "endpoint_id": llama_id}),
    )
    .await;
    let seen = app
        .get(&format!("/api/v1/endpoints/{llama_id}"), &member)
        .await;
    assert_eq!(seen.status, StatusCode::OK, "{}", seen.text);
    assert_eq!(
        seen.body["urls"],
        json!([format!("http://127.0.0.1:{port}/llama")])
    );

    // Another tenant's admin cannot see or delete it.
    let path = format!("/api/v1/endpoints/{llama_id}");
    assert_eq!(app.get(&path, &other).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.delete(&path, &other).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(names(&app.get("/api/v1/endpoints", &other).await.body).is_empty());

    // Without a rule an endpoint is invisible (404, also on delete); `view` shows it, but
    // changing it needs `manage` (403).
    let billing = id(&created(
        &app,
        &admin,
        "/api/v1/endpoints",
        json!({"project_id": finance, "name": "billing"}),
    )
    .await);
    let bpath = format!("/api/v1/endpoints/{billing}");
    assert_eq!(app.get(&bpath, &member).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.delete(&bpath, &member).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        names(&app.get("/api/v1/endpoints", &member).await.body),
        ["llama-3"]
    );
    created(&app, &admin, "/api/v1/access-rules", json!({"group_id": team, "permission": "view", "resource_kind": "endpoint", "project_id": finance})).await;
    assert_eq!(app.get(&bpath, &member).await.status, StatusCode::OK);
    assert_eq!(
        names(&app.get("/api/v1/endpoints", &member).await.body),
        ["billing", "llama-3"]
    );
    assert_eq!(
        app.delete(&bpath, &member).await.status,
        StatusCode::FORBIDDEN
    );
    let t = app
        .post(
            &format!("{bpath}/targets"),
            &member,
            json!({"address": "10.0.0.9:80"}),
        )
        .await;
    assert_eq!(t.status, StatusCode::FORBIDDEN, "{}", t.text);

    // Creating needs `use` on the project; public endpoints are a tenant admin's choice.
    let r = app
        .post(
            "/api/v1/endpoints",
            &member,
            json!({"project_id": finance, "name": "fin"}),
        )
        .await;
    invalid(&r, "project_id");
    let r = app
        .post(
            "/api/v1/endpoints",
            &member,
            json!({"project_id": research, "name": "open", "public": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let open = created(
        &app,
        &admin,
        "/api/v1/endpoints",
        json!({"project_id": research, "name": "open", "public": true}),
    )
    .await;
    assert_eq!(open["public"], true);

    // Bad input names its field; a taken name is a conflict.
    for bad in ["", "Llama", "a_b", "x y", &"a".repeat(101)] {
        let r = app
            .post(
                "/api/v1/endpoints",
                &member,
                json!({"project_id": research, "name": bad}),
            )
            .await;
        invalid(&r, "name");
    }
    let r = app
        .post(
            "/api/v1/endpoints",
            &member,
            json!({"project_id": research, "name": "t", "targets": ["http://x:80"]}),
        )
        .await;
    invalid(&r, "targets");
    let r = app
        .post(
            "/api/v1/endpoints",
            &member,
            json!({"project_id": research, "name": "llama-3"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    // Names are per tenant.
    let globex_project = id(&created(
        &app,
        &other,
        "/api/v1/projects",
        json!({"name": "research"}),
    )
    .await);
    created(
        &app,
        &other,
        "/api/v1/endpoints",
        json!({"project_id": globex_project, "name": "llama-3"}),
    )
    .await;
    let r = app
        .post(
            "/api/v1/endpoints",
            &other,
            json!({"project_id": research, "name": "x"}),
        )
        .await;
    invalid(&r, "project_id");

    // Targets: the owner adds and removes them; bad addresses and duplicates are refused.
    let tpath = format!("/api/v1/endpoints/{llama_id}/targets");
    for bad in [
        "10.0.0.8",
        "10.0.0.8:0",
        "10.0.0.8:65536",
        "http://10.0.0.8:80",
        "a b:80",
        "h:80/x",
        &format!("{}:80", "a.".repeat(128)),
    ] {
        let r = app.post(&tpath, &member, json!({"address": bad})).await;
        invalid(&r, "address");
    }
    let t = created(&app, &member, &tpath, json!({"address": "[::1]:9000"})).await;
    assert_eq!(t["address"], "[::1]:9000");
    let dup = app
        .post(&tpath, &member, json!({"address": "[::1]:9000"}))
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.text);
    assert_eq!(
        app.post(&tpath, &other, json!({"address": "h:1"}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let one = format!("{tpath}/{}", id(&t));
    assert_eq!(app.delete(&one, &other).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.delete(&one, &member).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete(&one, &member).await.status,
        StatusCode::NOT_FOUND
    );
    let targets = app.get(&path, &member).await.body["targets"].clone();
    assert_eq!(targets.as_array().unwrap().len(), 2);

    // The owner deletes it: its routes go with it.
    assert_eq!(
        app.delete(&path, &member).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.get(&path, &member).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.count("SELECT COUNT(*) FROM gateway_routes").await, 0);
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM endpoint_targets WHERE endpoint_id = '{llama_id}'"
        ))
        .await,
        0
    );

    for action in [
        "endpoint.create",
        "endpoint.delete",
        "endpoint.target_add",
        "endpoint.target_remove",
    ] {
        assert!(audited(&app, action).await >= 1, "{action}");
    }
    let routes_removed = app
        .count("SELECT COUNT(*) FROM audit_log WHERE action = 'endpoint.delete' AND summary LIKE '%/llama%'")
        .await;
    assert_eq!(
        routes_removed, 1,
        "the delete's entry lists the routes removed"
    );
    let api_audit = app.get("/api/v1/audit?action=endpoint.", &admin).await;
    assert_eq!(api_audit.status, StatusCode::OK, "{}", api_audit.text);
    assert!(api_audit.text.contains("endpoint.target_remove"));
    app.finish().await;
}

async fn gateway_api_gateways_get_distinct_ports_until_the_range_is_spent(kind: Kind) {
    let app = TestApp::with_settings(kind, |c| c.gateway.ports = 18600..=18601).await;
    let (admin, member, research, _, _) = setup(&app).await;
    let other = app.login("globex", "admin").await;

    let r = app
        .post("/api/v1/gateways", &member, json!({"name": "mine"}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    for bad in ["", "Prod", "p_1", &"a".repeat(101)] {
        invalid(
            &app.post("/api/v1/gateways", &admin, json!({"name": bad}))
                .await,
            "name",
        );
    }
    let prod = created(&app, &admin, "/api/v1/gateways", json!({"name": "prod"})).await;
    let dup = app
        .post("/api/v1/gateways", &admin, json!({"name": "prod"}))
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.text);
    let dev = created(&app, &other, "/api/v1/gateways", json!({"name": "dev"})).await;
    let mut ports = [
        prod["port"].as_i64().unwrap(),
        dev["port"].as_i64().unwrap(),
    ];
    ports.sort();
    assert_eq!(ports, [18600, 18601], "distinct, from the range");
    assert_eq!(prod["url"], format!("http://127.0.0.1:{}", prod["port"]));

    // The range is spent, across tenants.
    let full = app
        .post("/api/v1/gateways", &admin, json!({"name": "test"}))
        .await;
    assert_eq!(full.status, StatusCode::CONFLICT, "{}", full.text);
    assert!(
        full.body["detail"].as_str().unwrap().contains("port"),
        "{}",
        full.text
    );

    // Members see the tenant's gateways, not another tenant's.
    let listed = app.get("/api/v1/gateways", &member).await;
    assert_eq!(names(&listed.body), ["prod"]);
    let gpath = format!("/api/v1/gateways/{}", id(&prod));
    assert_eq!(app.get(&gpath, &member).await.status, StatusCode::OK);
    assert_eq!(app.get(&gpath, &other).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.delete(&gpath, &other).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&gpath, &member).await.status,
        StatusCode::FORBIDDEN
    );

    // Deleting takes its routes and tokens along and frees its port.
    let ep = id(&created(
        &app,
        &member,
        "/api/v1/endpoints",
        json!({"project_id": research, "name": "e"}),
    )
    .await);
    created(
        &app,
        &admin,
        "/api/v1/routes",
        json!({"gateway_id": id(&prod), "path_prefix": "/e", "endpoint_id": ep}),
    )
    .await;
    created(
        &app,
        &member,
        &format!("{gpath}/tokens"),
        json!({"name": "ci"}),
    )
    .await;
    assert_eq!(
        app.delete(&gpath, &admin).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM gateway_routes").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM gateway_tokens").await, 0);
    let again = created(&app, &admin, "/api/v1/gateways", json!({"name": "test"})).await;
    assert_eq!(again["port"], prod["port"]);
    assert_eq!(audited(&app, "gateway.create").await, 3);
    assert_eq!(audited(&app, "gateway.delete").await, 1);
    app.finish().await;
}

async fn gateway_api_routes_publish_and_switch_endpoints(kind: Kind) {
    let app = TestApp::new(kind).await;
    let (admin, member, research, _, _) = setup(&app).await;
    let other = app.login("globex", "admin").await;
    let gw = id(&created(&app, &admin, "/api/v1/gateways", json!({"name": "prod"})).await);
    let blue = id(&created(
        &app,
        &member,
        "/api/v1/endpoints",
        json!({"project_id": research, "name": "blue"}),
    )
    .await);
    let green = id(&created(
        &app,
        &member,
        "/api/v1/endpoints",
        json!({"project_id": research, "name": "green"}),
    )
    .await);
    let globex_gw = id(&created(&app, &other, "/api/v1/gateways", json!({"name": "prod"})).await);

    let route = |host: &str, prefix: &str| json!({"gateway_id": gw, "host": host, "path_prefix": prefix, "endpoint_id": blue});
    let r = app.post("/api/v1/routes", &member, route("", "/v1")).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    for bad in [
        "",
        "v1",
        "/a/../b",
        "/a?x=1",
        "/a#b",
        "/a b",
        "/a\u{1}",
        &format!("/{}", "a".repeat(200)),
    ] {
        invalid(
            &app.post("/api/v1/routes", &admin, route("", bad)).await,
            "path_prefix",
        );
    }
    for bad in [
        "a b.com",
        "a_b.com",
        "-a.com",
        "a..com",
        "http://a.com",
        &"a.".repeat(127),
    ] {
        invalid(
            &app.post("/api/v1/routes", &admin, route(bad, "/v1")).await,
            "host",
        );
    }
    let r = app
        .post(
            "/api/v1/routes",
            &admin,
            json!({"gateway_id": globex_gw, "path_prefix": "/v1", "endpoint_id": blue}),
        )
        .await;
    invalid(&r, "gateway_id");
    let r = app
        .post(
            "/api/v1/routes",
            &admin,
            json!({"gateway_id": gw, "path_prefix": "/v1", "endpoint_id": "nope"}),
        )
        .await;
    invalid(&r, "endpoint_id");

    let a = created(&app, &admin, "/api/v1/routes", route("API.Acme.dev", "/v1")).await;
    assert_eq!(a["host"], "api.acme.dev");
    let dup = app
        .post("/api/v1/routes", &admin, route("api.acme.dev", "/v1"))
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.text);
    created(&app, &admin, "/api/v1/routes", route("", "/v1")).await;
    let port = app
        .get(&format!("/api/v1/gateways/{gw}"), &member)
        .await
        .body["port"]
        .clone();
    let urls = app
        .get(&format!("/api/v1/endpoints/{blue}"), &member)
        .await
        .body["urls"]
        .clone();
    assert_eq!(
        urls,
        json!([
            format!("http://127.0.0.1:{port}/v1"),
            format!("http://api.acme.dev:{port}/v1")
        ])
    );

    // Members list them, filtered by gateway if they like.
    assert_eq!(
        app.get("/api/v1/routes", &member)
            .await
            .body
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let filtered = app
        .get(&format!("/api/v1/routes?gateway_id={globex_gw}"), &member)
        .await;
    assert_eq!(filtered.body, json!([]));
    assert_eq!(app.get("/api/v1/routes", &other).await.body, json!([]));

    // A switch keeps the URL and moves it to the other endpoint.
    let rpath = format!("/api/v1/routes/{}", id(&a));
    assert_eq!(
        app.patch(&rpath, &member, json!({"endpoint_id": green}))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.patch(&rpath, &other, json!({"endpoint_id": green}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    invalid(
        &app.patch(&rpath, &admin, json!({"endpoint_id": "nope"}))
            .await,
        "endpoint_id",
    );
    let switched = app
        .patch(&rpath, &admin, json!({"endpoint_id": green}))
        .await;
    assert_eq!(switched.status, StatusCode::OK, "{}", switched.text);
    assert_eq!(switched.body["endpoint_id"], green);
    assert_eq!(
        (&switched.body["host"], &switched.body["path_prefix"]),
        (&a["host"], &a["path_prefix"])
    );
    let urls = app
        .get(&format!("/api/v1/endpoints/{green}"), &member)
        .await
        .body["urls"]
        .clone();
    assert_eq!(urls, json!([format!("http://api.acme.dev:{port}/v1")]));
    let entry = app
        .count(&format!("SELECT COUNT(*) FROM audit_log WHERE action = 'route.update' AND summary LIKE '%{blue}%' AND summary LIKE '%{green}%'"))
        .await;
    assert_eq!(entry, 1, "route.update names both endpoints");

    assert_eq!(
        app.delete(&rpath, &member).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.delete(&rpath, &other).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&rpath, &admin).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.get(&rpath, &admin).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(&format!("/api/v1/endpoints/{green}"), &member)
            .await
            .body["urls"],
        json!([])
    );
    assert_eq!(audited(&app, "route.create").await, 2);
    assert_eq!(audited(&app, "route.delete").await, 1);
    app.finish().await;
}
