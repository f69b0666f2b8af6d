//! The driver's executor events committed in two halves at once (PostgreSQL), where one half
//! fails.

use sqlx::Row;

use super::events::halves_by_job;
use super::*;

/// 600 jobs being preempted report their stops at once: PostgreSQL commits the events in two
/// halves, and the store refuses every write of the second half's jobs. The first half
/// commits (its jobs are queued again to resume), and its stops are over: a later preemption
/// or abort of those jobs is sent to their executor again. Before 6591123 a failed half kept
/// the other half's ended stops as sent, so a job preempted a second time was never stopped
/// (its executor never heard of the second stop).
#[tokio::test]
async fn a_committed_half_forgets_its_ended_stops_when_the_other_half_fails() {
    let scratch = crate::store::scratch::Scratch::new("sy_split").await;
    let store = &scratch.store;
    crate::demo::seed(store).await.unwrap();
    let q = sqlx::query(
        "SELECT q.id, p.group_id, q.tenant_id, u.id AS user_id, u.username FROM queues q
         JOIN policies p ON p.id = q.policy_id JOIN users u ON u.tenant_id = q.tenant_id
         ORDER BY q.id, u.id LIMIT 1",
    )
    .fetch_one(&store.pool)
    .await
    .unwrap();
    let pool: String =
        sqlx::query_scalar("SELECT id FROM pools WHERE executor = 'simulated' ORDER BY id LIMIT 1")
            .fetch_one(&store.pool)
            .await
            .unwrap();
    sqlx::query(
        "INSERT INTO jobs (id, tenant_id, queue_id, group_id, user_id, username, name, command, gpu_milli,
            priority_class, priority, preemptible, state, stop_reason, pool_id, node, node_name, slices, handle,
            submitted_at, queued_at, admitted_at, started_at, updated_at)
         SELECT 'split-' || lpad(g::text, 4, '0'), $1, $2, $3, $4, $5, 'job ' || g, 'true', 125,
            'train', 50, 1, 'preempting', 'preempt', $6, 0, 'node-0', '[]', 'sim-' || g, 1, 1, 2, 3, 3
         FROM generate_series(1, 600) g",
    )
    .bind(q.try_get::<String, _>("tenant_id").unwrap())
    .bind(q.try_get::<String, _>("id").unwrap())
    .bind(q.try_get::<String, _>("group_id").unwrap())
    .bind(q.try_get::<String, _>("user_id").unwrap())
    .bind(q.try_get::<String, _>("username").unwrap())
    .bind(&pool)
    .execute(&store.pool)
    .await
    .unwrap();
    let ids: Vec<String> = (1..=600).map(|g| format!("split-{g:04}")).collect();
    let events: Vec<ExecEvent> = ids
        .iter()
        .map(|id| ExecEvent::Stopped {
            job_id: id.clone(),
            checkpointed: true,
            detail: "stopped after its checkpoint".into(),
        })
        .collect();
    let (first, second) = halves_by_job(&events);
    let job_of = |e: &ExecEvent| match e {
        ExecEvent::Stopped { job_id, .. } => job_id.clone(),
        _ => unreachable!(),
    };
    let (first, second): (Vec<String>, Vec<String>) = (
        first.iter().map(job_of).collect(),
        second.iter().map(job_of).collect(),
    );
    assert_eq!((first.len(), second.len()), (300, 300));
    // The store refuses every write of the second half's jobs (as a full disk would).
    for sql in [
        "CREATE TABLE refused (id TEXT PRIMARY KEY)",
        "CREATE FUNCTION refuse_job_writes() RETURNS trigger AS $$ BEGIN IF EXISTS (SELECT 1 FROM refused WHERE id = OLD.id) THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER refuse_job_writes BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_job_writes()",
    ] {
        sqlx::query(sql).execute(&store.pool).await.unwrap();
    }
    for id in &second {
        sqlx::query("INSERT INTO refused (id) VALUES ($1)")
            .bind(id)
            .execute(&store.pool)
            .await
            .unwrap();
    }
    let mut d = Driver::new(
        store.clone(),
        DriverConfig::default(),
        SchedulerHandle::default(),
    );
    d.stops_sent = ids.iter().cloned().collect();

    assert!(
        d.apply_events(&events).await.is_err(),
        "the second half's writes are refused"
    );

    let state = |id: String| {
        let pool = store.pool.clone();
        async move {
            let r = sqlx::query("SELECT state, resume_count FROM jobs WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
            (
                r.try_get::<String, _>("state").unwrap(),
                r.try_get::<i64, _>("resume_count").unwrap(),
            )
        }
    };
    for id in &first {
        assert_eq!(state(id.clone()).await, ("queued".to_string(), 1), "{id}");
        assert!(
            !d.stops_sent.contains(id),
            "{id}: its stop is over, so a later one is sent again"
        );
    }
    for id in &second {
        assert_eq!(
            state(id.clone()).await,
            ("preempting".to_string(), 0),
            "{id}"
        );
        assert!(d.stops_sent.contains(id), "{id}: still being stopped");
    }
    drop(d);
    scratch.finish().await;
}
