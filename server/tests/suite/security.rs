//! Findings of the security review, each as what an attacker tried: a tenant admin taking over
//! a platform admin, a reset password leaving tokens working, SCIM disabling local admins, a
//! tenant reserving a whole shared pool, and a user filling the queue.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp, PASSWORD};
use crate::scim::scim;

both_stores!(
    tenant_admins_cannot_take_over_platform_admins,
    an_admin_reset_revokes_the_users_api_tokens,
    scim_never_touches_local_accounts_or_admins,
    shared_pool_reservations_stay_within_grants,
    waiting_jobs_are_capped_per_user_and_group
);

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

async fn tenant_admins_cannot_take_over_platform_admins(kind: Kind) {
    let app = TestApp::new(kind).await;
    let root = app.seed_platform_admin().await;
    // A tenant admin of the platform tenant (not a platform admin).
    let ops = app
        .post(
            "/api/v1/users",
            &root,
            json!({"username": "ops", "password": PASSWORD, "is_tenant_admin": true}),
        )
        .await;
    assert_eq!(ops.status, StatusCode::CREATED, "{}", ops.text);
    let ops = app.login("platform", "ops").await;
    let root_id = app.user_id(&ops, "root").await;
    let path = format!("/api/v1/users/{root_id}");
    for change in [
        json!({"password": "taken-over-password-1"}),
        json!({"disabled": true}),
        json!({"email": "attacker@evil.test"}),
    ] {
        let r = app.patch(&path, &ops, change.clone()).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{change}: {}", r.text);
    }
    assert_eq!(app.delete(&path, &ops).await.status, StatusCode::FORBIDDEN);
    // Root is untouched: the old password still works, the account exists, nothing audited.
    app.login("platform", "root").await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM audit_log WHERE action IN ('user.update', 'user.delete')")
            .await,
        0
    );
    // A platform admin may still manage another platform admin's account.
    let r = app
        .patch(&path, &root, json!({"display_name": "Root of all"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    app.finish().await;
}

async fn an_admin_reset_revokes_the_users_api_tokens(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let made = app
        .post(
            "/api/v1/tokens",
            &member,
            json!({"name": "ci", "expires_in_days": 30}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let ci = made.body["token"].as_str().unwrap().to_string();
    assert_eq!(app.get("/api/v1/me", &ci).await.status, StatusCode::OK);
    let member_id = app.user_id(&admin, "member").await;
    let r = app
        .patch(
            &format!("/api/v1/users/{member_id}"),
            &admin,
            json!({"password": "a-brand-new-password"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    for t in [&member, &ci] {
        assert_eq!(
            app.get("/api/v1/me", t).await.status,
            StatusCode::UNAUTHORIZED,
            "a reset revokes every API token of the user"
        );
    }
    let audit = app.get("/api/v1/audit?action=user.update", &admin).await;
    assert_eq!(
        audit.body["items"][0]["summary"]["changes"]["api_tokens"]["revoked"], 2,
        "{}",
        audit.text
    );
    // The admin's own password change keeps the admin's tokens, and says so.
    let admin_id = app.user_id(&admin, "admin").await;
    let own = app
        .patch(
            &format!("/api/v1/users/{admin_id}"),
            &admin,
            json!({"password": "my-own-new-password"}),
        )
        .await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.text);
    assert_eq!(app.get("/api/v1/me", &admin).await.status, StatusCode::OK);
    app.finish().await;
}

async fn scim_never_touches_local_accounts_or_admins(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let token = app.post("/api/v1/scim/token", &admin, json!({})).await.body["token"]
        .as_str()
        .unwrap()
        .to_string();
    let admin_id = app.user_id(&admin, "admin").await;
    let member_id = app.user_id(&admin, "member").await;
    for uid in [&admin_id, &member_id] {
        let path = format!("/scim/v2/Users/{uid}");
        let off = json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "replace", "value": {"active": false}}]});
        let r = scim(&app, Method::PATCH, &path, &token, Some(off)).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
        let put = json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "renamed", "active": false});
        let r = scim(&app, Method::PUT, &path, &token, Some(put)).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
        let r = scim(&app, Method::DELETE, &path, &token, None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    }
    // Both local accounts still sign in, unchanged.
    app.login("acme", "admin").await;
    app.login("acme", "member").await;
    let listed = scim(&app, Method::GET, "/scim/v2/Users", &token, None).await;
    assert_eq!(listed.body["totalResults"], 0, "{}", listed.text);
    // A group membership of a local account is not SCIM's to add either.
    let g = scim(
        &app,
        Method::POST,
        "/scim/v2/Groups",
        &token,
        Some(json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "ops",
        "members": [{"value": admin_id}]})),
    )
    .await;
    assert_eq!(g.status, StatusCode::BAD_REQUEST, "{}", g.text);
    // Users SCIM provisioned remain its to manage.
    let made = scim(&app, Method::POST, "/scim/v2/Users", &token, Some(json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "pat", "active": true}))).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let pat = id(&made.body);
    let r = scim(
        &app,
        Method::DELETE,
        &format!("/scim/v2/Users/{pat}"),
        &token,
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    app.finish().await;
}

fn node(name: &str, gpus: u32) -> Value {
    json!({"name": name, "gpus": gpus, "gpu_model": "H100-80GB", "gpu_memory_mb": 81920, "cpu_cores": 64, "memory_mb": 524288})
}

async fn shared_pool_reservations_stay_within_grants(kind: Kind) {
    let app = TestApp::new(kind).await;
    let root = app.seed_platform_admin().await;
    let acme = app.seed_tenant("acme").await;
    let globex = app.seed_tenant("globex").await;
    let a = app.login("acme", "admin").await;
    let g = app.login("globex", "admin").await;
    let pool = app
        .post("/api/v1/pools", &root, json!({"name": "h100-shared", "executor": "simulated", "shared": true, "nodes": [node("h1", 8), node("h2", 8)]}))
        .await;
    assert_eq!(pool.status, StatusCode::CREATED, "{}", pool.text);
    let pool = id(&pool.body);
    let grant = |tenant: &str, milli: i64, who: &str| {
        let path = format!("/api/v1/pools/{pool}/grants/{tenant}");
        let who = who.to_string();
        let app = &app;
        async move {
            app.call(
                Method::PUT,
                &path,
                Some(&who),
                Some(json!({"reservation_milli": milli})),
            )
            .await
        }
    };
    assert_eq!(
        grant(&globex, 16000, &g).await.status,
        StatusCode::FORBIDDEN,
        "tenant admins cannot grant"
    );
    assert_eq!(grant(&acme, 12000, &root).await.status, StatusCode::OK);
    assert_eq!(grant(&globex, 4000, &root).await.status, StatusCode::OK);
    let over = grant(&globex, 8000, &root).await;
    assert_eq!(
        over.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "grants never exceed capacity: {}",
        over.text
    );

    // Globex tries to reserve the whole pool: the policy alone is fine, the queue over the
    // shared pool is refused; a reservation within the grant passes.
    let group = id(&app
        .post("/api/v1/groups", &g, json!({"name": "research"}))
        .await
        .body);
    let profile = id(&app
        .post(
            "/api/v1/profiles",
            &g,
            json!({"name": "one", "gpu_milli": 1000}),
        )
        .await
        .body);
    let policy = app
        .post(
            "/api/v1/policies",
            &g,
            json!({"group_id": group, "reservation_milli": 16000, "limit_milli": 16000}),
        )
        .await;
    assert_eq!(policy.status, StatusCode::OK, "{}", policy.text);
    let queue = json!({"name": "grab", "policy_id": id(&policy.body), "profile_id": profile, "pools": [pool]});
    let refused = app.post("/api/v1/queues", &g, queue.clone()).await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert_eq!(refused.body["errors"][0]["field"], "pools");
    assert!(refused.text.contains("granted 4000"), "{}", refused.text);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM queues").await,
        0,
        "nothing stored"
    );
    let within = app
        .post(
            "/api/v1/policies",
            &g,
            json!({"group_id": group, "reservation_milli": 4000, "limit_milli": 16000}),
        )
        .await;
    assert_eq!(within.status, StatusCode::OK, "{}", within.text);
    assert_eq!(
        app.post("/api/v1/queues", &g, queue).await.status,
        StatusCode::CREATED
    );
    // Raising the reservation once the queue exists is refused too, and changes nothing.
    let raise = app
        .post(
            "/api/v1/policies",
            &g,
            json!({"group_id": group, "reservation_milli": 16000, "limit_milli": 16000}),
        )
        .await;
    assert_eq!(
        raise.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        raise.text
    );
    assert_eq!(raise.body["errors"][0]["field"], "reservation_milli");
    let kept = app
        .get(&format!("/api/v1/policies/{}", id(&policy.body)), &g)
        .await;
    assert_eq!(kept.body["reservation_milli"], 4000);
    // Each tenant sees its own grant only; the platform admin sees both.
    let mine = app.get(&format!("/api/v1/pools/{pool}/grants"), &g).await;
    assert_eq!(mine.body.as_array().unwrap().len(), 1, "{}", mine.text);
    assert_eq!(mine.body[0]["reserved_milli"], 4000);
    let all = app
        .get(&format!("/api/v1/pools/{pool}/grants"), &root)
        .await;
    assert_eq!(all.body.as_array().unwrap().len(), 2);
    let _ = a;
    app.finish().await;
}

async fn waiting_jobs_are_capped_per_user_and_group(kind: Kind) {
    let mut app = TestApp::new(kind).await;
    let mut config = (*app.state.config).clone();
    config.max_pending_per_user = 3;
    config.max_pending_per_group = 4;
    app.state.config = std::sync::Arc::new(config);
    app.router = switchyard::routes::app(app.state.clone());
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let pool = id(&app
        .post(
            "/api/v1/pools",
            &admin,
            json!({"name": "own", "executor": "simulated", "nodes": [node("n1", 8)]}),
        )
        .await
        .body);
    let group = id(&app
        .post("/api/v1/groups", &admin, json!({"name": "team"}))
        .await
        .body);
    let member_id = app.user_id(&admin, "member").await;
    app.post(
        &format!("/api/v1/groups/{group}/members"),
        &admin,
        json!({"user_id": member_id}),
    )
    .await;
    let profile = id(&app
        .post(
            "/api/v1/profiles",
            &admin,
            json!({"name": "one", "gpu_milli": 1000}),
        )
        .await
        .body);
    let policy = id(&app
        .post(
            "/api/v1/policies",
            &admin,
            json!({"group_id": group, "reservation_milli": 0, "limit_milli": 1000}),
        )
        .await
        .body);
    let q = id(&app
        .post(
            "/api/v1/queues",
            &admin,
            json!({"name": "q", "policy_id": policy, "profile_id": profile, "pools": [pool]}),
        )
        .await
        .body);
    let job = |n: usize| json!({"queue_id": q, "name": format!("j{n}"), "command": "x"});
    let batch = app
        .post(
            "/api/v1/jobs/batch",
            &member,
            json!({"jobs": [job(1), job(2), job(3), job(4)]}),
        )
        .await;
    assert_eq!(
        batch.status,
        StatusCode::CONFLICT,
        "a batch past the cap: {}",
        batch.text
    );
    for n in 1..=3 {
        let r = app.post("/api/v1/jobs", &member, job(n)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let fourth = app.post("/api/v1/jobs", &member, job(4)).await;
    assert_eq!(fourth.status, StatusCode::CONFLICT, "{}", fourth.text);
    assert!(fourth.text.contains("at most 3"), "{}", fourth.text);
    // The admin may add one more to the group, then the group is full.
    assert_eq!(
        app.post("/api/v1/jobs", &admin, job(5)).await.status,
        StatusCode::CREATED
    );
    let full = app.post("/api/v1/jobs", &admin, job(6)).await;
    assert_eq!(full.status, StatusCode::CONFLICT, "{}", full.text);
    assert_eq!(app.count("SELECT COUNT(*) FROM jobs").await, 4);
    app.finish().await;
}
