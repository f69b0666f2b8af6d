//! Group-based access rules: models, datasets, projects and queues, inherited down project
//! subtrees, granted and revoked on the very next request, and "what can this user do".

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(
    rules_grant_along_project_subtrees_and_revoke_at_once,
    queue_rules_and_what_a_user_can_do
);

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

async fn created(app: &TestApp, token: &str, path: &str, body: Value) -> String {
    let r = app.post(path, token, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{path}: {}", r.text);
    id(&r.body)
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect()
}

async fn rules_grant_along_project_subtrees_and_revoke_at_once(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    app.seed_tenant("globex").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let research = created(
        &app,
        &admin,
        "/api/v1/projects",
        json!({"name": "research"}),
    )
    .await;
    let vision = created(
        &app,
        &admin,
        "/api/v1/projects",
        json!({"name": "vision", "parent_id": research}),
    )
    .await;
    let finance = created(&app, &admin, "/api/v1/projects", json!({"name": "finance"})).await;
    let team = created(
        &app,
        &admin,
        "/api/v1/groups",
        json!({"name": "vision-team"}),
    )
    .await;
    let member_id = app.user_id(&admin, "member").await;
    let add = app
        .post(
            &format!("/api/v1/groups/{team}/members"),
            &admin,
            json!({ "user_id": member_id }),
        )
        .await;
    assert_eq!(add.status, StatusCode::CREATED);
    let m1 = created(&app, &admin, "/api/v1/models", json!({"project_id": vision, "name": "detector", "location_uri": "s3://models/detector/v3", "metadata": {"framework": "pytorch"}})).await;
    created(&app, &admin, "/api/v1/models", json!({"project_id": finance, "name": "forecaster", "location_uri": "s3://models/forecaster"})).await;

    // No rule: nothing to see, and a direct look is a 404 like another tenant's.
    assert!(names(&app.get("/api/v1/models", &member).await.body).is_empty());
    assert_eq!(
        app.get(&format!("/api/v1/models/{m1}"), &member)
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // view on models of the research subtree reaches vision's model, not finance's.
    let view = created(&app, &admin, "/api/v1/access-rules", json!({"group_id": team, "permission": "view", "resource_kind": "model", "project_id": research})).await;
    let seen = app.get("/api/v1/models", &member).await.body;
    assert_eq!(names(&seen), ["detector"]);
    assert_eq!(seen[0]["permission"], "view");
    assert_eq!(seen[0]["metadata"]["framework"], "pytorch");
    let del = app.delete(&format!("/api/v1/models/{m1}"), &member).await;
    assert_eq!(del.status, StatusCode::FORBIDDEN, "view is not manage");

    // Registering needs `use` on the project.
    let refused = app
        .post(
            "/api/v1/datasets",
            &member,
            json!({"project_id": vision, "name": "coco", "location_uri": "s3://data/coco"}),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert_eq!(refused.body["errors"][0]["field"], "project_id");
    created(&app, &admin, "/api/v1/access-rules", json!({"group_id": team, "permission": "use", "resource_kind": "project", "project_id": research})).await;
    let ds = app
        .post(
            "/api/v1/datasets",
            &member,
            json!({"project_id": vision, "name": "coco", "location_uri": "s3://data/coco"}),
        )
        .await;
    assert_eq!(ds.status, StatusCode::CREATED, "{}", ds.text);
    assert_eq!(ds.body["permission"], "admin", "the owner administers it");

    // Leaving the group: the next request sees only what the member owns.
    let out = app
        .delete(
            &format!("/api/v1/groups/{team}/members/{member_id}"),
            &admin,
        )
        .await;
    assert_eq!(out.status, StatusCode::NO_CONTENT, "{}", out.text);
    assert!(names(&app.get("/api/v1/models", &member).await.body).is_empty());
    assert_eq!(
        names(&app.get("/api/v1/datasets", &member).await.body),
        ["coco"]
    );
    let again = app
        .post(
            &format!("/api/v1/groups/{team}/members"),
            &admin,
            json!({ "user_id": member_id }),
        )
        .await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(
        names(&app.get("/api/v1/models", &member).await.body),
        ["detector"]
    );
    // Deleting the rule revokes just as fast.
    assert_eq!(
        app.delete(&format!("/api/v1/access-rules/{view}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert!(names(&app.get("/api/v1/models", &member).await.body).is_empty());

    // Bad rules are refused at the field; other tenants see none of it.
    let bad = app
        .post("/api/v1/access-rules", &admin, json!({"group_id": "nope", "permission": "use", "resource_kind": "model", "resource_id": m1, "project_id": vision}))
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let fields: Vec<&str> = bad.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["group_id", "resource_id"]);
    let not_a_level = app
        .post(
            "/api/v1/access-rules",
            &admin,
            json!({"group_id": team, "permission": "owner", "resource_kind": "model"}),
        )
        .await;
    assert_eq!(
        not_a_level.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        not_a_level.text
    );
    let other = app.login("globex", "admin").await;
    assert_eq!(
        app.get("/api/v1/access-rules", &other).await.body,
        json!([])
    );
    assert!(names(&app.get("/api/v1/models", &other).await.body).is_empty());
    assert_eq!(
        app.get(&format!("/api/v1/models/{m1}"), &other)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let audit = app.get("/api/v1/audit?action=access.", &admin).await;
    let actions: Vec<&str> = audit.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["access.revoke", "access.grant", "access.grant"]);
    app.finish().await;
}

async fn queue_rules_and_what_a_user_can_do(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let owners = created(
        &app,
        &admin,
        "/api/v1/groups",
        json!({"name": "ml-research"}),
    )
    .await;
    let guests = created(&app, &admin, "/api/v1/groups", json!({"name": "guests"})).await;
    let member_id = app.user_id(&admin, "member").await;
    app.post(
        &format!("/api/v1/groups/{guests}/members"),
        &admin,
        json!({ "user_id": member_id }),
    )
    .await;
    let pool = created(&app, &admin, "/api/v1/pools", json!({"name": "p", "executor": "simulated", "nodes": [{"name": "n1", "gpus": 8, "gpu_model": "H100", "gpu_memory_mb": 81920}]})).await;
    let prof = created(
        &app,
        &admin,
        "/api/v1/profiles",
        json!({"name": "one", "gpu_milli": 1000}),
    )
    .await;
    let pol = app
        .post(
            "/api/v1/policies",
            &admin,
            json!({"group_id": owners, "reservation_milli": 1000, "limit_milli": 2000}),
        )
        .await;
    let queue = created(
        &app,
        &admin,
        "/api/v1/queues",
        json!({"name": "train", "policy_id": pol.body["id"], "profile_id": prof, "pools": [pool]}),
    )
    .await;
    let job = json!({"queue_id": queue, "name": "j", "command": "x"});

    let denied = app.post("/api/v1/jobs", &member, job.clone()).await;
    assert_eq!(
        denied.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        denied.text
    );
    let rule = created(&app, &admin, "/api/v1/access-rules", json!({"group_id": guests, "permission": "use", "resource_kind": "queue", "resource_id": queue})).await;
    let allowed = app.post("/api/v1/jobs", &member, job.clone()).await;
    assert_eq!(allowed.status, StatusCode::CREATED, "{}", allowed.text);

    let access = app
        .get(&format!("/api/v1/users/{member_id}/access"), &admin)
        .await;
    assert_eq!(access.status, StatusCode::OK, "{}", access.text);
    assert_eq!(access.body["groups"], json!(["guests"]));
    let grant = &access.body["grants"][0];
    assert_eq!(grant["resource_kind"], "queue");
    assert_eq!(grant["resource_name"], "train");
    assert_eq!(grant["permission"], "use");
    assert_eq!(grant["via"], json!(["guests"]));
    let forbidden = app
        .get(&format!("/api/v1/users/{member_id}/access"), &member)
        .await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);

    app.delete(&format!("/api/v1/access-rules/{rule}"), &admin)
        .await;
    let after = app.post("/api/v1/jobs", &member, job).await;
    assert_eq!(after.status, StatusCode::UNPROCESSABLE_ENTITY);
    let access = app
        .get(&format!("/api/v1/users/{member_id}/access"), &admin)
        .await;
    assert_eq!(access.body["grants"], json!([]));
    app.finish().await;
}
