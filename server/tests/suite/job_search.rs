//! The jobs list's search and filters: by state, group, user and part of the name (its LIKE
//! wildcards taken literally), members limited to their own jobs.

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{setup, small_queue, submit};

both_stores!(jobs_are_found_by_name_user_group_and_state);

async fn jobs_are_found_by_name_user_group_and_state(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    for name in ["train-a", "train-b", "eval_1", "eval-100%"] {
        submit(
            &app,
            &s.member,
            json!({"queue_id": q, "name": name, "command": "true"}),
        )
        .await;
    }
    submit(
        &app,
        &s.admin,
        json!({"queue_id": q, "name": "admin-train", "command": "true"}),
    )
    .await;
    let names = |path: &str, token: &str| {
        let path = path.to_string();
        let token = token.to_string();
        let app = &app;
        async move {
            let r = app.get(&path, &token).await;
            assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
            let mut n: Vec<String> = r.body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["name"].as_str().unwrap().to_string())
                .collect();
            n.sort();
            n
        }
    };
    assert_eq!(
        names("/api/v1/jobs?q=TRAIN", &s.admin).await,
        ["admin-train", "train-a", "train-b"]
    );
    // `%` and `_` are literal: "eval_" does not match "eval-100%", and "100%" matches only it.
    assert_eq!(names("/api/v1/jobs?q=eval_", &s.admin).await, ["eval_1"]);
    assert_eq!(
        names("/api/v1/jobs?q=100%25", &s.admin).await,
        ["eval-100%"]
    );
    assert_eq!(
        names("/api/v1/jobs?user=admin", &s.admin).await,
        ["admin-train"]
    );
    // A member sees only their own, whatever they ask for.
    assert_eq!(
        names("/api/v1/jobs?q=train", &s.member).await,
        ["train-a", "train-b"]
    );
    assert!(names("/api/v1/jobs?user=admin", &s.member).await.is_empty());
    // By group and state.
    let one = app.get("/api/v1/jobs?limit=1", &s.admin).await;
    let group = one.body["items"][0]["group_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        names(
            &format!("/api/v1/jobs?group_id={group}&state=queued"),
            &s.admin
        )
        .await
        .len(),
        5
    );
    assert!(names("/api/v1/jobs?group_id=nope", &s.admin)
        .await
        .is_empty());
    let long = "x".repeat(201);
    let r = app.get(&format!("/api/v1/jobs?q={long}"), &s.admin).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    app.finish().await;
}
