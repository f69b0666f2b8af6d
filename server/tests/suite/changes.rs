//! The driver reads each job change once, by change numbers in commit order (migration 0015):
//! a job written by a transaction that was still open while the driver read, and committed
//! long after, is scheduled all the same (with the earlier five-second overlap window it was
//! missed until the next full read, five minutes later).

use crate::common::{bounded, Kind, TestApp};
use crate::jobs::{setup, small_queue, submit, wait_state};
use serde_json::json;

/// PostgreSQL only: there, transactions commit out of order and a reader does not wait for a
/// writer. (On SQLite a writing transaction holds the one write lock, so the driver's next
/// commit waits for it and no later change can be read before it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_committed_by_a_long_transaction_is_scheduled() {
    bounded("a_job_committed_by_a_long_transaction_is_scheduled", || async {
        let app = TestApp::with_scheduler(Kind::Postgres).await;
        let s = setup(&app, "acme").await;
        let q = small_queue(&app, &s).await;
        let body = |name: &str| json!({"queue_id": q, "name": name, "command": "x", "gpu_milli": 500, "duration_ms": 600000});
        let first = submit(&app, &s.member, body("first")).await;
        wait_state(&app, &s.member, &first, "running").await;
        // A copy of it, queued, written by a transaction that stays open.
        let copy = switchyard::store::new_id();
        let mut tx = app.store().pool.begin().await.unwrap();
        sqlx::query(
            "INSERT INTO jobs (id, name, tenant_id, queue_id, group_id, user_id, username, command, env, gpu_milli, gpu_memory_mb, priority_class, priority, preemptible,
                abort_timeout_ms, duration_ms, state, submitted_at, queued_at, updated_at)
             SELECT $1, 'copy', tenant_id, queue_id, group_id, user_id, username, command, env, gpu_milli, gpu_memory_mb, priority_class, priority, preemptible,
                abort_timeout_ms, duration_ms, 'queued', $2, $2, $2 FROM jobs WHERE id = $3",
        )
        .bind(&copy)
        .bind(app.store().now())
        .bind(&first)
        .execute(&mut *tx)
        .await
        .unwrap();
        // The driver goes on meanwhile: it schedules another job, and reads again on its
        // ticks, for longer than the old overlap window.
        let second = submit(&app, &s.member, body("second")).await;
        wait_state(&app, &s.member, &second, "running").await;
        tokio::time::sleep(std::time::Duration::from_millis(6_000)).await;
        tx.commit().await.unwrap();
        // The next cycle (a submit wakes it) reads the copy and starts it.
        let _third = submit(&app, &s.member, body("third")).await;
        wait_state(&app, &s.member, &copy, "running").await;
        app.finish().await;
    })
    .await
}
