//! The audit log: filters, paging, one entry per change, and tamper detection.

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use switchyard::audit::verify;

both_stores!(audit_filters_and_pages, verify_detects_tampering);

async fn audit_filters_and_pages(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let before = app.count("SELECT COUNT(*) FROM audit_log").await;
    let g = app
        .post("/api/v1/groups", &admin, json!({"name": "audited"}))
        .await;
    let gid = g.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        app.count("SELECT COUNT(*) FROM audit_log").await,
        before + 1,
        "one entry per change"
    );
    // A refused change writes nothing.
    app.post("/api/v1/groups", &admin, json!({"name": "audited"}))
        .await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM audit_log").await,
        before + 1
    );

    let by_action = app.get("/api/v1/audit?action=group.create", &admin).await;
    let items = by_action.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    let e = &items[0];
    assert_eq!(e["actor_name"], "admin");
    assert_eq!(e["target_id"], gid.as_str());
    assert_eq!(e["summary"]["name"], "audited");
    assert!(
        !e["request_id"].as_str().unwrap().is_empty(),
        "request id recorded"
    );
    assert_eq!(e["hash"].as_str().unwrap().len(), 64);

    assert_eq!(
        app.get(&format!("/api/v1/audit?target={gid}"), &admin)
            .await
            .body["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let by_prefix = app.get("/api/v1/audit?action=user.", &admin).await;
    assert_eq!(
        by_prefix.body["items"].as_array().unwrap().len(),
        2,
        "two user.create entries"
    );
    let by_actor = app.get("/api/v1/audit?actor=admin", &admin).await;
    assert!(by_actor.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["actor_name"] == "admin"));
    assert_eq!(
        app.get("/api/v1/audit?from=2999-01-01", &admin).await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert!(!app
        .get(
            "/api/v1/audit?to=2999-01-01&from=2000-01-01T00:00:00Z",
            &admin
        )
        .await
        .body["items"]
        .as_array()
        .unwrap()
        .is_empty());

    // Paging walks every entry once, newest first.
    let total = app.count("SELECT COUNT(*) FROM audit_log").await;
    let mut seqs = Vec::new();
    let mut path = "/api/v1/audit?limit=2".to_string();
    loop {
        let page = app.get(&path, &admin).await;
        assert_eq!(page.status, StatusCode::OK);
        seqs.extend(
            page.body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["seq"].as_i64().unwrap()),
        );
        match page.body["next_cursor"].as_str() {
            Some(c) => path = format!("/api/v1/audit?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seqs, (1..=total).rev().collect::<Vec<_>>());
    app.finish().await;
}

async fn verify_detects_tampering(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    for name in ["a", "b", "c"] {
        app.post("/api/v1/groups", &admin, json!({"name": name}))
            .await;
    }
    let intact = verify(app.store()).await.unwrap();
    assert_eq!(intact.len(), 1);
    assert!(intact[0].problems.is_empty(), "{:?}", intact[0].problems);
    let total = intact[0].entries;
    assert!(total >= 6);

    // Someone edits a summary in place.
    sqlx::query("UPDATE audit_log SET summary = '{\"name\":\"innocent\"}' WHERE seq = 4")
        .execute(&app.store().pool)
        .await
        .unwrap();
    let edited = verify(app.store()).await.unwrap();
    assert_eq!(
        edited[0].problems,
        ["entry 4 was changed after it was written"]
    );

    // Someone deletes an entry in the middle.
    sqlx::query("DELETE FROM audit_log WHERE seq = 2")
        .execute(&app.store().pool)
        .await
        .unwrap();
    let gap = verify(app.store()).await.unwrap();
    assert!(
        gap[0]
            .problems
            .iter()
            .any(|p| p.contains("entries 2..2 are missing")),
        "{:?}",
        gap[0].problems
    );

    // Someone deletes the newest entry (the chain alone would still look whole).
    sqlx::query(&format!("DELETE FROM audit_log WHERE seq = {total}"))
        .execute(&app.store().pool)
        .await
        .unwrap();
    let tail = verify(app.store()).await.unwrap();
    assert!(
        tail[0]
            .problems
            .iter()
            .any(|p| p.contains("entries were deleted")),
        "{:?}",
        tail[0].problems
    );
    app.finish().await;
}
