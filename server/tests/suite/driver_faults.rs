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

/// The PostgreSQL session that holds this schema's scheduler lock, if any.
async fn lock_holder(app: &TestApp) -> Option<i32> {
    sqlx::query_scalar(
        "SELECT l.pid FROM pg_locks l, (SELECT hashtext('switchyard-scheduler:' || current_schema())::bigint AS k) x
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
           AND l.classid::text::bigint = ((x.k >> 32) & 4294967295)
           AND l.objid::text::bigint = (x.k & 4294967295)",
    )
    .fetch_optional(&app.state.store.pool)
    .await
    .unwrap()
}

/// The leader's lock connection is killed (a network cut, a database failover): the driver
/// notices, stops, takes the lock again on a new session and goes on scheduling. It used to
/// keep scheduling without the lock, so a second replica could lead at the same time.
/// PostgreSQL only: SQLite has one process and no leader lock.
mod a_leader_that_loses_its_lock_stops_and_takes_it_again {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        crate::common::bounded(
            "a_leader_that_loses_its_lock_stops_and_takes_it_again",
            super::a_leader_that_loses_its_lock_stops_and_takes_it_again,
        )
        .await
    }
}

async fn a_leader_that_loses_its_lock_stops_and_takes_it_again() {
    {
        let app = TestApp::with_scheduler(Kind::Postgres).await;
        let s = setup(&app, "acme").await;
        let q = small_queue(&app, &s).await;
        let mut holder = None;
        for _ in 0..50 {
            holder = lock_holder(&app).await;
            if holder.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let first = holder.expect("the driver holds the scheduler lock");
        let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(first)
            .fetch_one(&app.state.store.pool)
            .await
            .unwrap();
        assert!(killed);
        let mut again = None;
        for _ in 0..100 {
            match lock_holder(&app).await {
                Some(pid) if pid != first => {
                    again = Some(pid);
                    break;
                }
                _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
        assert!(
            again.is_some(),
            "nobody holds the scheduler lock 10 s after its session ended"
        );
        // And it schedules.
        let id = submit(
            &app,
            &s.member,
            json!({"queue_id": q, "name": "after", "command": "x", "gpu_milli": 1000, "duration_ms": 60000}),
        )
        .await;
        wait_state(&app, &s.member, &id, "running").await;
        app.finish().await;
    }
}
