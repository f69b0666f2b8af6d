//! The scheduler's driver when the store fails under it: nothing the executors reported is lost.

use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{job, setup, small_queue, submit, wait_state};

both_stores!(executor_events_survive_failed_commits);

/// The store refuses every change to `jobs` for a while (an injected failure, as a full disk
/// or a lost connection would): the exit the executor reported meanwhile is kept and committed
/// once the store takes writes again, instead of being dropped after five tries (which left
/// the job `running` on its GPUs until a restart).
async fn executor_events_survive_failed_commits(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let id = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "short", "command": "x", "gpu_milli": 1000, "duration_ms": 1500}),
    )
    .await;
    wait_state(&app, &s.member, &id, "running").await;
    let pool = &app.state.store.pool;
    let statements: &[&str] = match kind {
        Kind::Sqlite => &[
            "CREATE TABLE inject_failure (x INTEGER)",
            "INSERT INTO inject_failure VALUES (1)",
            "CREATE TRIGGER refuse_job_updates BEFORE UPDATE ON jobs WHEN EXISTS (SELECT 1 FROM inject_failure) BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
        ],
        Kind::Postgres => &[
            "CREATE TABLE inject_failure (x INTEGER)",
            "INSERT INTO inject_failure VALUES (1)",
            "CREATE FUNCTION refuse_job_updates() RETURNS trigger AS $$ BEGIN IF EXISTS (SELECT 1 FROM inject_failure) THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse_job_updates BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_job_updates()",
        ],
    };
    for sql in statements {
        sqlx::query(sql).execute(pool).await.unwrap();
    }
    // The job exits after 1.5 s; its exit cannot be stored for the next 4 s (many retries).
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(job(&app, &s.member, &id).await["job"]["state"], "running");
    sqlx::query("DELETE FROM inject_failure")
        .execute(pool)
        .await
        .unwrap();
    let done = wait_state(&app, &s.member, &id, "succeeded").await;
    assert_eq!(done["job"]["exit_code"], 0);
    app.finish().await;
}
