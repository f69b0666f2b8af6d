//! Store behaviour that must hold on both databases.

use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use switchyard::store::Store;

both_stores!(
    migrations_are_idempotent,
    concurrent_writes_keep_one_valid_chain,
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
    let reports = switchyard::audit::verify(app.store()).await.unwrap();
    assert!(reports.iter().all(|r| r.problems.is_empty()), "{reports:?}");
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
