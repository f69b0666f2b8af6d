//! A large admission: 1,199 jobs admitted in one cycle (on PostgreSQL in multi-row statements
//! of up to 4,000 parameters, several per table, and in two transactions at once, as are their
//! 1,199 `running` reports) are each stored once, with both admission events, one `running`
//! event, one `job.admit` and one `job.running` entry, and an intact audit chain.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{group_queue, id, node, pool, profile, setup};

both_stores!(a_thousand_jobs_admitted_at_once_are_each_stored_once);

async fn a_thousand_jobs_admitted_at_once_are_each_stored_once(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    // 20 nodes of 8 GPUs: room for 1,280 jobs of an eighth of a GPU.
    let nodes: Vec<Value> = (0..20).map(|i| node(&format!("n{i}"), 8)).collect();
    let p = pool(&app, &s, "big", "simulated", json!(nodes)).await;
    let eighth = profile(&app, &s, json!({"name": "eighth", "gpu_milli": 125})).await;
    // A limit of one job while they are submitted: the rest wait.
    let policy = |limit: i64| json!({"reservation_milli": limit, "limit_milli": limit});
    let queue = group_queue(&app, &s, "many", policy(125), &eighth, &[&p], true).await;
    let groups = app.get("/api/v1/groups", &s.admin).await;
    let gid = groups.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "many")
        .map(id)
        .unwrap_or_else(|| panic!("no group many: {}", groups.text));
    for b in 0..12 {
        let jobs: Vec<Value> = (0..100)
            .map(|i| json!({"queue_id": queue, "name": format!("j{b}-{i}"), "command": "x", "duration_ms": 3_600_000}))
            .collect();
        let r = app
            .post("/api/v1/jobs/batch", &s.member, json!({ "jobs": jobs }))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let pool_db = app.store().pool.clone();
    let count = |sql: &'static str| {
        let pool_db = pool_db.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool_db)
                .await
                .unwrap()
        }
    };
    let until = |sql: &'static str, want: i64| {
        let count = &count;
        async move {
            for _ in 0..600 {
                if count(sql).await == want {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("{sql} never reached {want} (now {})", count(sql).await);
        }
    };
    until("SELECT COUNT(*) FROM jobs WHERE state = 'running'", 1).await;
    until("SELECT COUNT(*) FROM jobs WHERE state = 'queued'", 1199).await;

    // The limit raised: one cycle admits the 1,199 waiting jobs.
    let mut raised = policy(1_000_000);
    raised["group_id"] = json!(gid);
    let pol = app.post("/api/v1/policies", &s.admin, raised).await;
    assert_eq!(pol.status, StatusCode::OK, "{}", pol.text);
    until("SELECT COUNT(*) FROM jobs WHERE state = 'running'", 1200).await;
    assert_eq!(
        count("SELECT COUNT(DISTINCT at) FROM job_events WHERE to_state = 'admitted'").await,
        2,
        "the first job, then the other 1,199 in one cycle"
    );
    for (state, sql) in [
        (
            "admitted",
            "SELECT COUNT(*) FROM job_events WHERE to_state = 'admitted'",
        ),
        (
            "starting",
            "SELECT COUNT(*) FROM job_events WHERE to_state = 'starting'",
        ),
        (
            "running",
            "SELECT COUNT(*) FROM job_events WHERE to_state = 'running'",
        ),
        (
            "admitted, each job once",
            "SELECT COUNT(DISTINCT job_id) FROM job_events WHERE to_state = 'admitted'",
        ),
        (
            "job.admit entries",
            "SELECT COUNT(*) FROM audit_log WHERE action = 'job.admit'",
        ),
        (
            "job.admit entries, each job once",
            "SELECT COUNT(DISTINCT target_id) FROM audit_log WHERE action = 'job.admit'",
        ),
        (
            "running, each job once",
            "SELECT COUNT(DISTINCT job_id) FROM job_events WHERE to_state = 'running'",
        ),
        (
            "job.running entries",
            "SELECT COUNT(*) FROM audit_log WHERE action = 'job.running'",
        ),
        (
            "job.running entries, each job once",
            "SELECT COUNT(DISTINCT target_id) FROM audit_log WHERE action = 'job.running'",
        ),
    ] {
        assert_eq!(count(sql).await, 1200, "{state}");
    }
    app.assert_audit_intact("a large admission keeps the chain intact")
        .await;
    app.finish().await;
}
