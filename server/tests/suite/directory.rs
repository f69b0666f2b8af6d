//! Users, groups, memberships, projects and tenants through the API.

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(
    users_lifecycle,
    groups_and_members,
    members_cannot_administer,
    projects_form_a_tree,
    lists_are_paginated,
    platform_admin_manages_tenants
);

async fn users_lifecycle(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let r = app.post("/api/v1/users", &admin, json!({"username": "Grace", "display_name": "Grace Hopper", "email": "grace@acme.example", "password": crate::common::PASSWORD})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        r.body["username"], "grace",
        "usernames are case-insensitive, kept lower-case"
    );
    assert_eq!(r.body["has_password"], true);
    assert!(r.body.get("password_hash").is_none());
    let id = r.body["id"].as_str().unwrap().to_string();
    app.login("acme", "grace").await;

    let dup = app
        .post("/api/v1/users", &admin, json!({"username": "grace"}))
        .await;
    assert_eq!(dup.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(dup.body["errors"][0]["field"], "username");
    let bad = app
        .post(
            "/api/v1/users",
            &admin,
            json!({"username": "no spaces", "email": "nope", "password": "short"}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let fields: Vec<_> = bad.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(fields, ["username", "email", "password"]);

    let upd = app
        .patch(
            &format!("/api/v1/users/{id}"),
            &admin,
            json!({"display_name": "Rear Admiral Hopper", "is_tenant_admin": true}),
        )
        .await;
    assert_eq!(upd.status, StatusCode::OK);
    assert_eq!(upd.body["display_name"], "Rear Admiral Hopper");
    assert_eq!(upd.body["is_tenant_admin"], true);
    let audit = app.get("/api/v1/audit?action=user.update", &admin).await;
    assert_eq!(
        audit.body["items"][0]["summary"]["changes"]["is_tenant_admin"]["to"],
        true
    );

    assert_eq!(
        app.delete(&format!("/api/v1/users/{id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get(&format!("/api/v1/users/{id}"), &admin).await.status,
        StatusCode::NOT_FOUND
    );
    app.finish().await;
}

async fn groups_and_members(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let g = app
        .post(
            "/api/v1/groups",
            &admin,
            json!({"name": "ml-research", "description": "Training"}),
        )
        .await;
    assert_eq!(g.status, StatusCode::CREATED);
    let gid = g.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        app.post("/api/v1/groups", &admin, json!({"name": "ml-research"}))
            .await
            .status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let users = app.get("/api/v1/users", &admin).await;
    let member_id = users.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "member")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    let add = app
        .post(
            &format!("/api/v1/groups/{gid}/members"),
            &admin,
            json!({"user_id": member_id}),
        )
        .await;
    assert_eq!(add.status, StatusCode::CREATED, "{}", add.text);
    assert_eq!(add.body["username"], "member");
    assert_eq!(
        app.post(
            &format!("/api/v1/groups/{gid}/members"),
            &admin,
            json!({"user_id": member_id})
        )
        .await
        .status,
        StatusCode::CONFLICT
    );
    let unknown = app
        .post(
            &format!("/api/v1/groups/{gid}/members"),
            &admin,
            json!({"user_id": "no-such-user"}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    let members = app
        .get(&format!("/api/v1/groups/{gid}/members"), &admin)
        .await;
    assert_eq!(members.body.as_array().unwrap().len(), 1);
    assert_eq!(
        app.get(&format!("/api/v1/groups/{gid}"), &admin).await.body["member_count"],
        1
    );

    // The member sees the group among their own.
    let member = app.login("acme", "member").await;
    let mine = app.get("/api/v1/groups", &member).await;
    assert_eq!(mine.status, StatusCode::OK);

    let rename = app
        .patch(
            &format!("/api/v1/groups/{gid}"),
            &admin,
            json!({"name": "research"}),
        )
        .await;
    assert_eq!(rename.body["name"], "research");
    assert_eq!(
        app.delete(&format!("/api/v1/groups/{gid}/members/{member_id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete(&format!("/api/v1/groups/{gid}/members/{member_id}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&format!("/api/v1/groups/{gid}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let actions: Vec<String> =
        sqlx::query_scalar("SELECT action FROM audit_log WHERE target_id = $1 ORDER BY seq")
            .bind(&gid)
            .fetch_all(&app.store().pool)
            .await
            .unwrap();
    assert_eq!(
        actions,
        [
            "group.create",
            "group.member_add",
            "group.update",
            "group.member_remove",
            "group.delete"
        ]
    );
    app.finish().await;
}

async fn members_cannot_administer(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let member = app.login("acme", "member").await;
    assert_eq!(
        app.get("/api/v1/users", &member).await.status,
        StatusCode::OK,
        "members may read the directory"
    );
    for (path, body) in [
        ("/api/v1/users", json!({"username": "eve"})),
        ("/api/v1/groups", json!({"name": "eve"})),
        ("/api/v1/projects", json!({"name": "eve"})),
        ("/api/v1/tenants", json!({"slug": "eve", "name": "Eve"})),
    ] {
        let r = app.post(path, &member, body).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(r.body["type"], "https://switchyard.dev/problems/forbidden");
    }
    assert_eq!(
        app.get("/api/v1/audit", &member).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.get("/api/v1/tenants", &member).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM users").await, 2);
    app.finish().await;
}

async fn projects_form_a_tree(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let parent = app
        .post("/api/v1/projects", &admin, json!({"name": "vision"}))
        .await;
    assert_eq!(parent.status, StatusCode::CREATED);
    let pid = parent.body["id"].as_str().unwrap().to_string();
    let child = app
        .post(
            "/api/v1/projects",
            &admin,
            json!({"name": "detection", "parent_id": pid}),
        )
        .await;
    assert_eq!(child.status, StatusCode::CREATED);
    assert_eq!(child.body["parent_id"], pid.as_str());
    let orphan = app
        .post(
            "/api/v1/projects",
            &admin,
            json!({"name": "x", "parent_id": "missing"}),
        )
        .await;
    assert_eq!(orphan.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(orphan.body["errors"][0]["field"], "parent_id");
    assert_eq!(
        app.delete(&format!("/api/v1/projects/{pid}"), &admin)
            .await
            .status,
        StatusCode::CONFLICT
    );
    let cid = child.body["id"].as_str().unwrap();
    assert_eq!(
        app.patch(
            &format!("/api/v1/projects/{cid}"),
            &admin,
            json!({"description": "boxes"})
        )
        .await
        .body["description"],
        "boxes"
    );
    // Moves: a project under its own child would make a cycle; to the top and back are fine.
    let cycle = app
        .patch(
            &format!("/api/v1/projects/{pid}"),
            &admin,
            json!({"parent_id": cid}),
        )
        .await;
    assert_eq!(cycle.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(cycle.body["errors"][0]["field"], "parent_id");
    let itself = app
        .patch(
            &format!("/api/v1/projects/{pid}"),
            &admin,
            json!({"parent_id": pid}),
        )
        .await;
    assert_eq!(itself.status, StatusCode::UNPROCESSABLE_ENTITY);
    let top = app
        .patch(
            &format!("/api/v1/projects/{cid}"),
            &admin,
            json!({"parent_id": null}),
        )
        .await;
    assert_eq!(top.status, StatusCode::OK);
    assert!(top.body["parent_id"].is_null());
    assert_eq!(top.body["description"], "boxes", "a move keeps the rest");
    let back = app
        .patch(
            &format!("/api/v1/projects/{cid}"),
            &admin,
            json!({"parent_id": pid}),
        )
        .await;
    assert_eq!(back.body["parent_id"], pid.as_str());
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM audit_log WHERE action = 'project.update' AND target_id = '{cid}' AND summary LIKE '%parent_id%'"
        ))
        .await,
        2,
        "each move is audited with where it went"
    );
    assert_eq!(
        app.delete(&format!("/api/v1/projects/{cid}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete(&format!("/api/v1/projects/{pid}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    app.finish().await;
}

async fn lists_are_paginated(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    for i in 0..7 {
        assert_eq!(
            app.post("/api/v1/groups", &admin, json!({"name": format!("g{i}")}))
                .await
                .status,
            StatusCode::CREATED
        );
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/groups?limit=3&cursor={c}"),
            None => "/api/v1/groups?limit=3".to_string(),
        };
        let page = app.get(&path, &admin).await;
        assert_eq!(page.status, StatusCode::OK);
        for g in page.body["items"].as_array().unwrap() {
            seen.push(g["name"].as_str().unwrap().to_string());
        }
        match page.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(
        seen,
        (0..7).map(|i| format!("g{i}")).collect::<Vec<_>>(),
        "every group once, in creation order"
    );
    assert_eq!(
        app.get("/api/v1/groups?limit=0", &admin).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        app.get("/api/v1/groups?limit=lots", &admin).await.status,
        StatusCode::BAD_REQUEST
    );
    app.finish().await;
}

async fn platform_admin_manages_tenants(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let root = app.seed_platform_admin().await;
    let created = app
        .post(
            "/api/v1/tenants",
            &root,
            json!({"slug": "globex", "name": "Globex"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(
        app.post(
            "/api/v1/tenants",
            &root,
            json!({"slug": "globex", "name": "Again"})
        )
        .await
        .status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        app.post(
            "/api/v1/tenants",
            &root,
            json!({"slug": "Bad Slug", "name": "x"})
        )
        .await
        .body["errors"][0]["field"],
        "slug"
    );
    // Counts of another tenant, not its contents: the summary carries numbers only, and the
    // platform admin's own lists do not show that tenant's people or groups.
    let acme_admin = app.login("acme", "admin").await;
    for g in ["ml", "ops", "data"] {
        let r = app
            .post("/api/v1/groups", &acme_admin, json!({"name": g}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let summary = app.get("/api/v1/tenants/acme", &root).await;
    assert_eq!(summary.body["groups"], 3);
    let mut keys: Vec<&String> = summary.body.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "created_at",
            "groups",
            "id",
            "name",
            "projects",
            "slug",
            "users"
        ],
        "numbers and names of the tenant, nothing of its members"
    );
    let root_users = app.get("/api/v1/users?limit=500", &root).await;
    assert!(
        root_users.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["username"] != "member" && u["username"] != "admin"),
        "{}",
        root_users.text
    );
    let root_groups = app.get("/api/v1/groups?limit=500", &root).await;
    assert!(root_groups.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["name"] != "ml"));
    let list = app.get("/api/v1/tenants", &root).await;
    let acme = list
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["slug"] == "acme")
        .unwrap()
        .clone();
    assert_eq!(acme["users"], 2);
    assert_eq!(acme["groups"], 3);
    assert_eq!(
        app.get("/api/v1/tenants/acme", &root).await.body["users"],
        2
    );
    assert_eq!(
        app.get("/api/v1/tenants/nope", &root).await.status,
        StatusCode::NOT_FOUND
    );
    // The new tenant's audit chain starts with its creation.
    let first: String =
        sqlx::query_scalar("SELECT action FROM audit_log WHERE tenant_id = $1 AND seq = 1")
            .bind(created.body["id"].as_str().unwrap())
            .fetch_one(&app.store().pool)
            .await
            .unwrap();
    assert_eq!(first, "tenant.create");
    app.finish().await;
}
