//! The jobs list's search and filters: by state, group, user and part of the name (its LIKE
//! wildcards taken literally), members limited to their own jobs.

use axum::http::StatusCode;
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{job, setup, small_queue, submit};

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

both_stores!(jobs_are_narrowed_by_time_and_listed_oldest_first);

/// `within` keeps the jobs submitted in the last hour (or day, or week); `sort=oldest` pages from
/// the first job on, its cursor going forward.
async fn jobs_are_narrowed_by_time_and_listed_oldest_first(kind: Kind) {
    let app = TestApp::with_manual_clock(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let job = |name: &str| json!({"queue_id": q, "name": name, "command": "true"});
    // (Sign-ins last a day: the test stays within one.)
    submit(&app, &s.member, job("five-hours-ago")).await;
    app.advance_clock(3 * 3_600_000);
    submit(&app, &s.member, job("two-hours-ago")).await;
    app.advance_clock(2 * 3_600_000 - 60_000);
    submit(&app, &s.member, job("a-minute-ago")).await;
    app.advance_clock(60_000);
    let names = |path: String| {
        let app = &app;
        let token = s.admin.clone();
        async move {
            let r = app.get(&path, &token).await;
            assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
            let items: Vec<String> = r.body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["name"].as_str().unwrap().to_string())
                .collect();
            (items, r.body["next_cursor"].as_str().map(str::to_string))
        }
    };
    let (hour, _) = names("/api/v1/jobs?within=hour".into()).await;
    assert_eq!(hour, ["a-minute-ago"]);
    let (day, _) = names("/api/v1/jobs?within=day".into()).await;
    assert_eq!(
        day,
        ["a-minute-ago", "two-hours-ago", "five-hours-ago"],
        "newest first"
    );
    let (first, cursor) = names("/api/v1/jobs?sort=oldest&limit=2".into()).await;
    assert_eq!(first, ["five-hours-ago", "two-hours-ago"]);
    let cursor = cursor.expect("a second page");
    let (second, none) = names(format!("/api/v1/jobs?sort=oldest&limit=2&cursor={cursor}")).await;
    assert_eq!(second, ["a-minute-ago"]);
    assert_eq!(none, None);
    for bad in ["within=month", "sort=largest", "sort=queues"] {
        let r = app.get(&format!("/api/v1/jobs?{bad}"), &s.admin).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            r.text
        );
        let field = bad.split('=').next().unwrap();
        assert!(r.text.contains(field), "{bad}: {}", r.text);
    }
}

both_stores!(a_queue_lists_its_waiting_jobs_in_the_schedulers_order);

/// `sort=queue` lists a queue's waiting jobs in the order the scheduler takes them (priority
/// class first, then submit time), page by page, and each job's place agrees with the
/// position its own page gives.
async fn a_queue_lists_its_waiting_jobs_in_the_schedulers_order(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let classes = json!({"classes": [
        {"name": "urgent", "priority": 200, "preemptible": false},
        {"name": "normal", "priority": 50, "preemptible": true}]});
    let r = app
        .patch(&format!("/api/v1/queues/{q}"), &s.admin, classes)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // No scheduler runs here: every job waits.
    let mut ids = std::collections::HashMap::new();
    for (name, class) in [
        ("n1", "normal"),
        ("u1", "urgent"),
        ("n2", "normal"),
        ("u2", "urgent"),
        ("n3", "normal"),
    ] {
        let id = submit(
            &app,
            &s.member,
            json!({"queue_id": q, "name": name, "command": "true", "gpu_milli": 2000,
                   "priority_class": class}),
        )
        .await;
        ids.insert(name, id);
    }
    let mut order = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = format!(
            "/api/v1/jobs?queue_id={q}&state=queued&sort=queue&limit=2{}",
            cursor
                .as_ref()
                .map(|c| format!("&cursor={c}"))
                .unwrap_or_default()
        );
        let r = app.get(&path, &s.admin).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        pages += 1;
        for j in r.body["items"].as_array().unwrap() {
            order.push(j["name"].as_str().unwrap().to_string());
        }
        cursor = r.body["next_cursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(order, ["u1", "u2", "n1", "n2", "n3"]);
    assert_eq!(pages, 3);
    for (place, name) in order.iter().enumerate() {
        let detail = job(&app, &s.member, &ids[name.as_str()]).await;
        assert_eq!(
            detail["waiting"]["position"],
            place as i64 + 1,
            "{name}: {detail}"
        );
    }
}

both_stores!(waiting_jobs_get_the_start_the_running_jobs_time_limits_allow);

/// In a queue's waiting order each job gets an estimated start: when the running jobs' ends
/// (on a simulated pool its run time, capped by its time limit) free the GPUs it and the jobs
/// ahead of it need; none where they never free enough.
async fn waiting_jobs_get_the_start_the_running_jobs_time_limits_allow(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    // The pool's two GPUs: one for 600 s, one for 300 s capped by a 100 s time limit.
    let long = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "long", "command": "true", "gpu_milli": 1000, "duration_ms": 600_000}),
    )
    .await;
    let short = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "short", "command": "true", "gpu_milli": 1000,
               "duration_ms": 300_000, "max_runtime_ms": 100_000}),
    )
    .await;
    let long = crate::jobs::wait_state(&app, &s.member, &long, "running").await;
    let short = crate::jobs::wait_state(&app, &s.member, &short, "running").await;
    let started = |j: &serde_json::Value| j["job"]["started_at"].as_i64().unwrap();
    for (name, milli) in [("two", 2000), ("one", 1000)] {
        submit(
            &app,
            &s.member,
            json!({"queue_id": q, "name": name, "command": "true", "gpu_milli": milli}),
        )
        .await;
    }
    let r = app
        .get(
            &format!("/api/v1/jobs?queue_id={q}&state=queued&sort=queue"),
            &s.admin,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let items = r.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{}", r.text);
    assert_eq!(items[0]["name"], "two");
    // Both GPUs are free once the 600 s job ends (the other ends at its 100 s limit before).
    assert_eq!(
        items[0]["estimated_start_at"].as_i64(),
        Some(started(&long) + 600_000),
        "{}",
        r.text
    );
    assert!(started(&short) + 100_000 < started(&long) + 600_000);
    // Nothing more ends: the third GPU's worth the queue needs is never freed.
    assert!(items[1].get("estimated_start_at").is_none(), "{}", r.text);
    // The other orders give none.
    let newest = app
        .get(&format!("/api/v1/jobs?queue_id={q}&state=queued"), &s.admin)
        .await;
    assert!(newest.body["items"][0].get("estimated_start_at").is_none());
    app.finish().await;
}
