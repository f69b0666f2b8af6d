//! Lanes of the audit chains (PostgreSQL): batch submits take whichever lane of the tenant's
//! `api` chain no other transaction holds, and the scheduler's driver writes the second half
//! of a large cycle on a lane of its own, so that transactions that commit side by side do
//! not queue behind one chain head. Every lane is a chain verified on its own, its opening
//! recorded in `api`. (SQLite's one write lock serialises writers: one lane there.)

use std::collections::HashMap;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use sqlx::Connection;

use crate::common::{bounded, Kind, TestApp};
use crate::jobs::{group_queue, id, node, pool, profile, setup, Setup};
use switchyard::audit::{verify, Chain};

/// A simulated pool of `nodes` 8-GPU nodes, a one-GPU profile and a queue over them with room
/// for every GPU: the queue's id.
async fn big_queue(app: &TestApp, s: &Setup, nodes: usize) -> String {
    let nodes: Vec<Value> = (0..nodes).map(|i| node(&format!("n{i}"), 8)).collect();
    let p = pool(app, s, "sim", "simulated", json!(nodes)).await;
    let one = profile(app, s, json!({"name": "one", "gpu_milli": 1000})).await;
    let gpus = 1000 * 8 * nodes.len() as i64;
    group_queue(
        app,
        s,
        "vision",
        json!({"reservation_milli": gpus, "limit_milli": gpus, "over_quota_weight": 1}),
        &one,
        &[&p],
        true,
    )
    .await
}

/// Submits `n` jobs in one `POST /jobs/batch`, within 10 s: their ids.
async fn batch(app: &TestApp, token: &str, queue: &str, tag: &str, n: usize) -> Vec<String> {
    let jobs: Vec<Value> = (0..n)
        .map(|i| json!({"queue_id": queue, "name": format!("{tag}-{i}"), "command": "x", "duration_ms": 600000}))
        .collect();
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        app.post("/api/v1/jobs/batch", token, json!({ "jobs": jobs })),
    )
    .await
    .unwrap_or_else(|_| panic!("batch {tag} waited for a lane another transaction holds"));
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.body["jobs"].as_array().unwrap().iter().map(id).collect()
}

/// The chain of each of `jobs`' `action` entries (every job exactly once).
async fn chains_of(app: &TestApp, action: &str, jobs: &[String]) -> HashMap<String, String> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT target_id, chain FROM audit_log WHERE action = $1")
            .bind(action)
            .fetch_all(&app.store().pool)
            .await
            .unwrap();
    let mut of = HashMap::new();
    for (job, chain) in rows {
        assert!(
            of.insert(job.clone(), chain).is_none(),
            "{job}: two {action} entries"
        );
    }
    jobs.iter()
        .map(|j| match of.remove(j) {
            Some(chain) => (j.clone(), chain),
            None => panic!("{j}: no {action} entry"),
        })
        .collect()
}

/// An open transaction on its own connection holding `lanes`' heads (as a batch does from
/// its insert until it commits).
async fn hold(app: &TestApp, tenant: &str, lanes: &[&str]) -> sqlx::AnyConnection {
    let mut c = sqlx::AnyConnection::connect(&app.db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut c).await.unwrap();
    let list = lanes
        .iter()
        .map(|l| format!("'{l}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let held = sqlx::query(&format!(
        "SELECT chain FROM audit_heads WHERE tenant_id = $1 AND chain IN ({list}) FOR UPDATE"
    ))
    .bind(tenant)
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert_eq!(held.len(), lanes.len(), "{lanes:?} exist");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_submits_take_a_free_lane_and_never_wait_for_a_held_one() {
    bounded(
        "batch_submits_take_a_free_lane_and_never_wait_for_a_held_one",
        || async {
            let app = TestApp::new(Kind::Postgres).await;
            let s = setup(&app, "acme").await;
            let q = big_queue(&app, &s, 1).await;
            let tenant: String = sqlx::query_scalar("SELECT id FROM tenants WHERE slug = 'acme'")
                .fetch_one(&app.store().pool)
                .await
                .unwrap();
            // The first batch finds no lane: it takes `api` and opens the three lanes, each
            // opening recorded in `api`.
            let first = batch(&app, &s.member, &q, "first", 3).await;
            let opened: Vec<String> = sqlx::query_scalar(
                "SELECT target_id FROM audit_log WHERE tenant_id = $1 AND chain = 'api' AND action = 'audit.chain_open' ORDER BY target_id",
            )
            .bind(&tenant)
            .fetch_all(&app.store().pool)
            .await
            .unwrap();
            assert_eq!(opened, ["api.1", "api.2", "api.3"]);
            let of = chains_of(&app, "job.submit", &first).await;
            assert!(of.values().all(|c| c == "api"), "{of:?}");

            // Two lanes held by transactions still open: a batch takes the third at once.
            let held = hold(&app, &tenant, &["api.1", "api.2"]).await;
            let second = batch(&app, &s.member, &q, "second", 3).await;
            let of = chains_of(&app, "job.submit", &second).await;
            assert!(of.values().all(|c| c == "api.3"), "{of:?}");
            // All three held: the batch waits for nothing but `api` itself.
            let third_lane = hold(&app, &tenant, &["api.3"]).await;
            let third = batch(&app, &s.member, &q, "third", 3).await;
            let of = chains_of(&app, "job.submit", &third).await;
            assert!(of.values().all(|c| c == "api"), "{of:?}");
            drop(held);
            drop(third_lane);

            // Many batches at once: every job's entry once, on more than one lane, and every
            // chain intact.
            let clients = (0..6).map(|c| {
                let (app, token, q) = (&app, &s.member, &q);
                async move {
                    let mut ids = Vec::new();
                    for b in 0..4 {
                        ids.extend(batch(app, token, q, &format!("c{c}-{b}"), 20).await);
                    }
                    ids
                }
            });
            let all: Vec<String> = futures::future::join_all(clients)
                .await
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(all.len(), 6 * 4 * 20);
            let of = chains_of(&app, "job.submit", &all).await;
            let mut lanes: Vec<&String> = of.values().collect();
            lanes.sort();
            lanes.dedup();
            assert!(lanes.len() >= 2, "concurrent batches used {lanes:?}");
            app.assert_audit_intact("every lane after concurrent batches")
                .await;

            // A lane deleted whole (its head and every entry) is found: `api` records its
            // opening.
            sqlx::query("DELETE FROM audit_log WHERE tenant_id = $1 AND chain = 'api.2'")
                .bind(&tenant)
                .execute(&app.store().pool)
                .await
                .unwrap();
            sqlx::query("DELETE FROM audit_heads WHERE tenant_id = $1 AND chain = 'api.2'")
                .bind(&tenant)
                .execute(&app.store().pool)
                .await
                .unwrap();
            let reports = verify(app.store()).await.unwrap();
            let gone = reports
                .iter()
                .find(|r| r.chain == Chain::Api2)
                .unwrap_or_else(|| panic!("the deleted lane is reported: {reports:?}"));
            assert!(
                gone.problems.iter().any(|p| p.contains("they were deleted")),
                "{gone:?}"
            );
            app.finish().await;
        },
    )
    .await;
}

/// A cycle of at least 512 admissions commits in two halves side by side: the second half's
/// entries go to the driver's second lane, and both lanes verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_cycle_writes_its_halves_on_two_lanes() {
    bounded("a_large_cycle_writes_its_halves_on_two_lanes", || async {
        let app = TestApp::with_scheduler(Kind::Postgres).await;
        let s = setup(&app, "acme").await;
        let q = big_queue(&app, &s, 80).await;
        // 600 jobs that fit, in one commit: the next cycle admits them all.
        let jobs = batch(&app, &s.member, &q, "big", 600).await;
        let running = || async {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM jobs WHERE state = 'running'")
                .fetch_one(&app.store().pool)
                .await
                .unwrap()
        };
        while running().await < 600 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let of = chains_of(&app, "job.admit", &jobs).await;
        let on = |lane: &str| of.values().filter(|c| *c == lane).count();
        assert_eq!(on("scheduler") + on("scheduler.1"), 600, "{of:?}");
        assert!(
            on("scheduler") >= 256 && on("scheduler.1") >= 256,
            "halves: {} on scheduler, {} on scheduler.1",
            on("scheduler"),
            on("scheduler.1")
        );
        app.assert_audit_intact("both of the driver's lanes").await;
        app.finish().await;
    })
    .await;
}
