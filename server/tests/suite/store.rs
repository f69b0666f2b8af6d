//! Store behaviour that must hold on both databases.

use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use switchyard::store::Store;

both_stores!(
    migrations_are_idempotent,
    concurrent_writes_keep_one_valid_chain,
    first_uses_of_tokens_beside_writes_are_not_500s,
    unique_keys_become_conflicts_not_500s
);

async fn migrations_are_idempotent(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    // Connecting again (a restart, a second replica) re-runs no migration and loses nothing.
    let again = Store::connect(&app.db.url).await.unwrap();
    let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
        .fetch_one(&again.pool)
        .await
        .unwrap();
    assert_eq!(users, 2);
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
        .fetch_one(&again.pool)
        .await
        .unwrap();
    assert_eq!(
        applied,
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/sqlite"))
            .unwrap()
            .count() as i64
    );
    again.pool.close().await;
    app.finish().await;
}

async fn concurrent_writes_keep_one_valid_chain(kind: Kind) {
    let app = std::sync::Arc::new(TestApp::new(kind).await);
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let mut tasks = Vec::new();
    for i in 0..24 {
        let app = app.clone();
        let admin = admin.clone();
        tasks.push(tokio::spawn(async move {
            app.post(
                "/api/v1/groups",
                &admin,
                json!({"name": format!("team-{i}")}),
            )
            .await
            .status
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), axum::http::StatusCode::CREATED);
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM groups").await, 24);
    app.assert_audit_intact("concurrent writers keep the chain intact")
        .await;
    let max: i64 = app.count("SELECT MAX(seq) FROM audit_log").await;
    assert_eq!(
        max,
        app.count("SELECT COUNT(*) FROM audit_log").await,
        "no gaps, no duplicates"
    );
    match std::sync::Arc::try_unwrap(app) {
        Ok(app) => app.finish().await,
        Err(_) => panic!("app still shared"),
    }
}

async fn unique_keys_become_conflicts_not_500s(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    // Same name in two tenants is fine; twice in one tenant is a field error.
    app.seed_tenant("globex").await;
    let other = app.login("globex", "admin").await;
    assert_eq!(
        app.post("/api/v1/projects", &admin, json!({"name": "shared-name"}))
            .await
            .status,
        201
    );
    assert_eq!(
        app.post("/api/v1/projects", &other, json!({"name": "shared-name"}))
            .await
            .status,
        201
    );
    let dup = app
        .post("/api/v1/projects", &admin, json!({"name": "shared-name"}))
        .await;
    assert_eq!(dup.status, 422);
    assert_eq!(dup.body["errors"][0]["field"], "name");
    app.finish().await;
}

/// A token's first use records `last_used_at` outside any write transaction; under load that
/// write landed between the reads and the first write of a submit's transaction, and on SQLite
/// the submit failed with "database is locked" (a 500) instead of waiting.
async fn first_uses_of_tokens_beside_writes_are_not_500s(kind: Kind) {
    let app = std::sync::Arc::new(TestApp::new(kind).await);
    let s = crate::jobs::setup(&app, "acme").await;
    let queue = crate::jobs::small_queue(&app, &s).await;
    let mut submitted = 0;
    for round in 0..6 {
        let mut tokens = Vec::new();
        for _ in 0..16 {
            tokens.push(app.login("acme", "member").await);
        }
        let mut tasks = Vec::new();
        for (i, token) in tokens.into_iter().enumerate() {
            let app = app.clone();
            let queue = queue.clone();
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::new();
                for k in 0..3 {
                    let r = app
                        .post(
                            "/api/v1/jobs",
                            &token,
                            json!({"queue_id": queue, "name": format!("j-{round}-{i}-{k}"), "command": "x", "gpu_milli": 125}),
                        )
                        .await;
                    out.push((r.status, r.text));
                }
                out
            }));
        }
        for t in tasks {
            for (status, text) in t.await.unwrap() {
                assert_eq!(status, axum::http::StatusCode::CREATED, "{text}");
                submitted += 1;
            }
        }
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM jobs").await, submitted);
    std::sync::Arc::try_unwrap(app)
        .ok()
        .expect("no task holds the app")
        .finish()
        .await;
}
