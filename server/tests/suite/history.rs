//! Scheduling history end to end: the scheduler runs with a sampler every 100 ms on a manual
//! clock (so each minute's samples are known), jobs run, and `GET /api/v1/scheduling/history`
//! shows the allocation, queue depth and waits, each caller within what it may see.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{group_queue, id, node, pool, profile, submit, wait_state, Setup};

both_stores!(history_shows_allocation_and_waits_to_whom_may_see_them);

const HOUR: &str = "/api/v1/scheduling/history?window=hour";

/// Polls the hour's history until the last buckets hold `sets` sample sets (oldest first).
async fn sampled(app: &TestApp, token: &str, sets: &[i64]) -> Value {
    app.wait_for(HOUR, token, &format!("sample sets {sets:?}"), |b| {
        b["samples"].as_array().is_some_and(|s| {
            s.len() == 60
                && s[60 - sets.len()..]
                    .iter()
                    .zip(sets)
                    .all(|(a, b)| a.as_i64() == Some(*b))
        })
    })
    .await
}

fn named<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|l| l.iter().find(|x| x[key] == name))
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|x| x[key].as_str().unwrap().to_string())
        .collect()
}

async fn history_shows_allocation_and_waits_to_whom_may_see_them(kind: Kind) {
    let mut app = TestApp::with_scheduler_and_manual_clock(kind).await;
    app.reconfigure(|c| c.scheduler.history_sample_ms = 100);
    app.restart_scheduler().await;
    let acme = app.seed_tenant("acme").await;
    let s = Setup {
        admin: app.login("acme", "admin").await,
        member: app.login("acme", "member").await,
    };
    app.seed_tenant("globex").await;
    let globex = app.login("globex", "admin").await;
    let root = app.seed_platform_admin().await;

    // Acme's own 4-GPU pool for vision (1 GPU reserved, may borrow); nlp reserves the 1 GPU
    // the platform grants acme on a shared 2-GPU pool. The member is in vision only.
    let sim = pool(&app, &s, "sim", "simulated", json!([node("a1", 4)])).await;
    let shared = app
        .post("/api/v1/pools", &root, json!({"name": "shared", "executor": "simulated", "shared": true, "nodes": [node("s1", 2)]}))
        .await;
    assert_eq!(shared.status, StatusCode::CREATED, "{}", shared.text);
    let shared = id(&shared.body);
    let grant = app
        .call(
            Method::PUT,
            &format!("/api/v1/pools/{shared}/grants/{acme}"),
            Some(&root),
            Some(json!({ "reservation_milli": 1000 })),
        )
        .await;
    assert_eq!(grant.status, StatusCode::OK, "{}", grant.text);
    let one = profile(&app, &s, json!({"name": "one", "gpu_milli": 1000})).await;
    let policy = |limit: i64| json!({"reservation_milli": 1000, "limit_milli": limit, "over_quota_weight": 1});
    let vision = group_queue(&app, &s, "vision", policy(2000), &one, &[&sim], true).await;
    let nlp = group_queue(&app, &s, "nlp", policy(1000), &one, &[&shared], false).await;

    // A minute later (the clock stands still until moved): two vision jobs and one of nlp
    // start at once; a third vision job waits at vision's limit.
    app.advance_clock(60_000);
    sampled(&app, &s.admin, &[1]).await;
    let job = |q: &str, name: &str| json!({"queue_id": q, "name": name, "command": "x", "duration_ms": 3_600_000});
    let first = submit(&app, &s.member, job(&vision, "v1")).await;
    let second = submit(&app, &s.member, job(&vision, "v2")).await;
    let third = submit(&app, &s.member, job(&vision, "v3")).await;
    let n1 = submit(&app, &s.admin, job(&nlp, "n1")).await;
    for j in [&first, &second, &n1] {
        wait_state(&app, &s.admin, j, "running").await;
    }
    // Half a minute on, the first ends and the third starts, after 30 s in the queue.
    app.advance_clock(30_000);
    let r = app
        .post(&format!("/api/v1/jobs/{first}/abort"), &s.member, json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    wait_state(&app, &s.admin, &third, "running").await;
    sampled(&app, &s.admin, &[2]).await;
    // The next minute's sample: vision runs the second (within its reservation) and the third
    // (borrowed), nlp its one job on the shared pool.
    app.advance_clock(30_000);
    let h = sampled(&app, &s.admin, &[2, 1]).await;
    assert_eq!(h["window"], "hour");
    assert_eq!(h["bucket_ms"], 60_000);
    assert_eq!(h["buckets"][59].as_i64(), Some(app.store().now()));

    let at = |series: &Value, i: usize| series["points"][i].clone();
    let pool_sim = named(&h["pools"], "name", "sim");
    assert_eq!(pool_sim["shared"], false);
    assert_eq!(
        at(pool_sim, 59),
        json!({"in_quota_milli": 1000, "over_quota_milli": 1000, "idle_milli": 2000})
    );
    assert!(at(pool_sim, 0).is_null(), "no samples an hour ago");
    let pool_shared = named(&h["pools"], "name", "shared");
    assert_eq!(pool_shared["shared"], true);
    assert_eq!(
        at(pool_shared, 59),
        json!({"in_quota_milli": 1000, "over_quota_milli": 0, "idle_milli": 1000})
    );
    assert_eq!(
        pool_shared["tenants"],
        json!([]),
        "tenants' shares are for platform admins"
    );
    let g = at(named(&h["groups"], "name", "vision"), 59);
    assert_eq!(
        (
            &g["in_quota_milli"],
            &g["over_quota_milli"],
            &g["unused_reservation_milli"],
            &g["running"],
            &g["waiting"]
        ),
        (
            &json!(1000),
            &json!(1000),
            &json!(0),
            &json!(2.0),
            &json!(0.0)
        ),
        "{g}"
    );
    let g = at(named(&h["groups"], "name", "nlp"), 59);
    assert_eq!(
        (&g["in_quota_milli"], &g["unused_reservation_milli"]),
        (&json!(1000), &json!(0)),
        "{g}"
    );
    // Waits: the first two started at once (in the first minute's second sample), the third
    // after 30 s (in this minute's).
    let q = named(&h["queues"], "name", "vision-q");
    assert_eq!(q["group_name"], "vision");
    assert_eq!(
        (&at(q, 58)["started"], &at(q, 58)["wait_p90_ms"]),
        (&json!(2), &json!(0)),
        "{q}"
    );
    let now = at(q, 59);
    assert_eq!(
        (
            &now["started"],
            &now["wait_p50_ms"],
            &now["wait_p99_ms"],
            &now["running"]
        ),
        (&json!(1), &json!(30_000), &json!(30_000), &json!(2.0)),
        "{now}"
    );
    assert_eq!(at(named(&h["queues"], "name", "nlp-q"), 58)["started"], 1);

    // The member sees its group and its queue, no pools and not nlp.
    let m = app.get(HOUR, &s.member).await;
    assert_eq!(m.status, StatusCode::OK, "{}", m.text);
    assert_eq!(names(&m.body["groups"], "name"), ["vision"]);
    assert_eq!(names(&m.body["queues"], "name"), ["vision-q"]);
    assert_eq!(m.body["pools"], json!([]));
    assert!(!m.text.contains("nlp"), "{}", m.text);

    // Another tenant sees the shared pool's totals, and nothing of acme's.
    let o = app.get(HOUR, &globex).await;
    assert_eq!(o.status, StatusCode::OK, "{}", o.text);
    assert_eq!(names(&o.body["pools"], "name"), ["shared"]);
    assert_eq!(o.body["pools"][0]["tenants"], json!([]));
    assert_eq!(
        (&o.body["groups"], &o.body["queues"]),
        (&json!([]), &json!([]))
    );
    for secret in ["vision", "nlp", "sim", "ACME", &acme] {
        assert!(!o.text.contains(secret), "{secret} in {}", o.text);
    }

    // The platform admin sees each tenant's use of the shared pool, not its groups.
    let p = app.get(HOUR, &root).await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    assert_eq!(names(&p.body["pools"], "name"), ["shared"]);
    let t = &p.body["pools"][0]["tenants"];
    assert_eq!(names(t, "tenant_name"), ["ACME"]);
    assert_eq!(
        t[0]["points"][59],
        json!({"in_quota_milli": 1000, "over_quota_milli": 0, "granted_milli": 1000})
    );
    for secret in ["vision", "nlp"] {
        assert!(!p.text.contains(secret), "{secret} in {}", p.text);
    }

    // A window that is not one is a 422 naming it.
    let bad = app
        .get("/api/v1/scheduling/history?window=month", &s.admin)
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert_eq!(
        bad.headers["content-type"], "application/problem+json",
        "{:?}",
        bad.headers
    );
    assert_eq!(bad.body["errors"][0]["field"], "window", "{}", bad.text);
    app.finish().await;
}
