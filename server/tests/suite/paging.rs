//! Every paged list, walked with more rows than a page: each row once, pages no larger than
//! asked, bad cursors and limits refused or harmless (never a 500), and lists filtered by what
//! the caller may see.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{setup, small_queue};
use crate::scim::scim;

both_stores!(every_list_pages_through_all_it_may_show);

/// Follows `next_cursor` from `path` (which has `?limit=N` or `&limit=N`) to the end; returns
/// every item, checking that no page is larger than `limit`.
async fn walk(app: &TestApp, token: &str, path: &str, limit: usize) -> Vec<Value> {
    let mut all = Vec::new();
    let mut next = path.to_string();
    for _ in 0..100 {
        let page = app.get(&next, token).await;
        assert_eq!(page.status, StatusCode::OK, "{next}: {}", page.text);
        let items = page.body["items"].as_array().unwrap();
        assert!(items.len() <= limit, "{next}: a page of {}", items.len());
        all.extend(items.iter().cloned());
        match page.body["next_cursor"].as_str() {
            Some(c) => next = format!("{path}&cursor={c}"),
            None => return all,
        }
    }
    panic!("{path}: more than 100 pages");
}

/// Each item's identity: its `id`, or for audit entries its position in its tenant's chain
/// (a batch may be written on a lane of `api`, whose positions count from 1 as well).
fn ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i["id"].as_str() {
            Some(id) => id.to_string(),
            None => format!("{}#{}#{}", i["tenant_id"], i["chain"], i["seq"]),
        })
        .collect()
}

fn assert_once(what: &str, items: &[Value], expected: usize) {
    let mut seen = ids(items);
    assert_eq!(seen.len(), expected, "{what}: {seen:?}");
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), expected, "{what}: a row came twice");
}

async fn every_list_pages_through_all_it_may_show(kind: Kind) {
    let app = TestApp::new(kind).await;
    let s = setup(&app, "acme").await;

    // Users: the seeded ones plus 9 more, by 4.
    for i in 0..9 {
        let r = app
            .post(
                "/api/v1/users",
                &s.admin,
                json!({"username": format!("u{i}"), "password": "a-long-enough-pw"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let total_users = app.get("/api/v1/users?limit=500", &s.admin).await.body["items"]
        .as_array()
        .unwrap()
        .len();
    assert!(total_users >= 11);
    let users = walk(&app, &s.admin, "/api/v1/users?limit=4", 4).await;
    assert_once("users", &users, total_users);

    // Projects, by 2.
    for i in 0..5 {
        let r = app
            .post(
                "/api/v1/projects",
                &s.admin,
                json!({"name": format!("p{i}")}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let projects = walk(&app, &s.admin, "/api/v1/projects?limit=2", 2).await;
    assert_once("projects", &projects, 5);

    // Jobs: 7 of the member's and 3 of the admin's. The member pages through their own only;
    // the admin through all ten.
    let q = small_queue(&app, &s).await;
    let spec = |i: usize| json!({"queue_id": q, "name": format!("j{i}"), "command": "x", "gpu_milli": 125, "duration_ms": 60000});
    let mine = app
        .post(
            "/api/v1/jobs/batch",
            &s.member,
            json!({"jobs": (0..7).map(spec).collect::<Vec<_>>()}),
        )
        .await;
    assert_eq!(mine.status, StatusCode::CREATED, "{}", mine.text);
    let theirs = app
        .post(
            "/api/v1/jobs/batch",
            &s.admin,
            json!({"jobs": (7..10).map(spec).collect::<Vec<_>>()}),
        )
        .await;
    assert_eq!(theirs.status, StatusCode::CREATED, "{}", theirs.text);
    let member_jobs = walk(&app, &s.member, "/api/v1/jobs?limit=3", 3).await;
    assert_once("the member's jobs", &member_jobs, 7);
    assert!(member_jobs.iter().all(|j| j["username"] == "member"));
    let all_jobs = walk(&app, &s.admin, "/api/v1/jobs?limit=3", 3).await;
    assert_once("all jobs", &all_jobs, 10);
    let newest_first: Vec<String> = ids(&all_jobs);
    let mut sorted = newest_first.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(newest_first, sorted, "jobs come newest first");

    // Audit, by 5: every entry once.
    let total_audit = app.get("/api/v1/audit?limit=500", &s.admin).await.body["items"]
        .as_array()
        .unwrap()
        .len();
    let audit = walk(&app, &s.admin, "/api/v1/audit?limit=5", 5).await;
    assert_once("audit", &audit, total_audit);

    // Bad limits are 422; junk cursors never a server error.
    for path in [
        "/api/v1/jobs?limit=0",
        "/api/v1/users?limit=501",
        "/api/v1/projects?limit=-1",
    ] {
        let r = app.get(path, &s.admin).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path}: {}",
            r.text
        );
    }
    for path in [
        "/api/v1/jobs?cursor=zzzz",
        "/api/v1/users?cursor=%00",
        "/api/v1/projects?cursor=' OR 1=1 --",
        "/api/v1/audit?cursor=not-a-cursor",
    ] {
        let r = app.get(&path.replace(' ', "%20"), &s.admin).await;
        assert!(
            r.status == StatusCode::OK || r.status == StatusCode::UNPROCESSABLE_ENTITY,
            "{path}: {} {}",
            r.status,
            r.text
        );
        if r.status == StatusCode::OK {
            assert!(r.body["items"].as_array().unwrap().len() <= 100);
        }
    }

    // SCIM: startIndex/count over the provisioned users.
    let token = app
        .post("/api/v1/scim/token", &s.admin, json!({}))
        .await
        .body["token"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 0..5 {
        let r = scim(
            &app,
            Method::POST,
            "/scim/v2/Users",
            &token,
            Some(json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": format!("scim{i}"), "active": true})),
        )
        .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let mut seen = Vec::new();
    let mut start = 1;
    loop {
        let r = scim(
            &app,
            Method::GET,
            &format!("/scim/v2/Users?startIndex={start}&count=2"),
            &token,
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(
            r.body["totalResults"], 5,
            "SCIM shows only what it provisioned"
        );
        let page = r.body["Resources"].as_array().cloned().unwrap_or_default();
        assert!(page.len() <= 2);
        if page.is_empty() {
            break;
        }
        seen.extend(
            page.iter()
                .map(|u| u["userName"].as_str().unwrap().to_string()),
        );
        start += page.len();
    }
    seen.sort();
    assert_eq!(seen, (0..5).map(|i| format!("scim{i}")).collect::<Vec<_>>());
    app.finish().await;
}
