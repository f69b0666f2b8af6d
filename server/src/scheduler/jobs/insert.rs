//! Writing prepared jobs: their rows and first events in multi-row inserts. Used by single
//! submits (through the group commit) and by batches.

use app::model::*;

use crate::audit;
use crate::nodes::executor::AbortKind;
use crate::store::{flag, new_id, Dialect, WriteTx};

/// What a queue's profile gives each job, stored with it.
#[derive(Clone, Copy)]
pub(super) struct Gives {
    gpu_memory_mb: i64,
    cpu_milli: i64,
    memory_mb: i64,
}

impl Gives {
    pub(super) fn of(p: &Profile) -> Gives {
        Gives {
            gpu_memory_mb: p.gpu_memory_mb,
            cpu_milli: p.cpu_milli,
            memory_mb: p.memory_mb,
        }
    }
}

const JOB_INSERT_COLUMNS: &str = "id, tenant_id, queue_id, group_id, user_id, username, name, command, image, env, gpu_milli, gpu_memory_mb, cpu_milli, memory_mb, priority_class, priority, preemptible,
    abort_kind, abort_command, abort_timeout_ms, checkpoint_dir, max_runtime_ms, duration_ms, serve_endpoint_id, serve_port, state, submitted_at, queued_at, updated_at, change_seq";
const JOB_INSERT_ARITY: usize = 29;
const EVENT_ARITY: usize = 7;

/// One prepared job to store: its tenant, what its profile gives it, its class's priority.
pub(super) struct NewJob<'a> {
    pub tenant_id: &'a str,
    pub job: &'a Job,
    pub gives: Gives,
    pub priority: i64,
}

type Query<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// The audit chain head the last insert statement locks and reads (PostgreSQL).
#[derive(Clone, Copy)]
pub(super) enum Head<'a> {
    /// The tenant's head of this chain, waited for where another transaction holds it.
    Chain(&'a str, audit::Chain),
    /// Whichever of the tenant's batch lanes no other transaction holds, if any
    /// ([`audit::lanes`]).
    FreeLane(&'a str),
}

/// Stores prepared jobs (state `queued`) and their first event, in multi-row inserts: on
/// PostgreSQL a chunk's jobs and events in one statement (one round trip), on SQLite in two.
/// On PostgreSQL the last statement also locks and reads `head` ([`audit::head_lock_sql`],
/// [`audit::lanes::free_lane_sql`]), the transaction's next step: one round trip less while
/// the head is held. `None` where none was taken (SQLite, no `head` asked for, or no lane
/// free).
pub(super) async fn insert_jobs(
    tx: &mut WriteTx,
    items: &[NewJob<'_>],
    head: Option<Head<'_>>,
) -> Result<Option<audit::HeadLocked>, sqlx::Error> {
    let d = tx.dialect;
    let mut locked = None;
    // Rows per statement: on PostgreSQL each job's event is in the same statement.
    let per_job = match d {
        Dialect::Postgres => JOB_INSERT_ARITY + EVENT_ARITY,
        Dialect::Sqlite => JOB_INSERT_ARITY,
    };
    // On PostgreSQL one row fewer per statement than the parameters allow: room for the head's three.
    let per_statement = match d {
        Dialect::Postgres => d.statement_params() / per_job - 1,
        Dialect::Sqlite => d.statement_params() / per_job,
    };
    let chunks = items.chunks(per_statement).count();
    for (i, chunk) in items.chunks(per_statement).enumerate() {
        let n = chunk.len();
        let jobs = format!(
            "INSERT INTO jobs ({JOB_INSERT_COLUMNS}) VALUES {}",
            d.rows(
                1,
                n,
                JOB_INSERT_ARITY,
                Some(crate::scheduler::changes::next_change(d))
            )
        );
        let events = format!(
            "INSERT INTO job_events (id, tenant_id, job_id, at, from_state, to_state, detail) VALUES {}",
            d.rows(1 + n * JOB_INSERT_ARITY, n, EVENT_ARITY, None)
        );
        match d {
            Dialect::Postgres => match head.filter(|_| i + 1 == chunks) {
                Some(Head::Chain(tenant_id, chain)) => {
                    let lock = audit::head_lock_sql(1 + n * (JOB_INSERT_ARITY + EVENT_ARITY));
                    let sql = format!("WITH j AS ({jobs}), e AS ({events}) {lock}");
                    let q = bind_events(bind_jobs(sqlx::query(&sql), chunk), chunk);
                    let row = audit::bind_head(q, tenant_id, chain)
                        .fetch_one(&mut *tx.tx)
                        .await?;
                    locked = Some(audit::HeadLocked {
                        tenant_id: tenant_id.to_string(),
                        chain,
                        row,
                    });
                }
                Some(Head::FreeLane(tenant_id)) => {
                    let lane =
                        audit::lanes::free_lane_sql(1 + n * (JOB_INSERT_ARITY + EVENT_ARITY));
                    let sql = format!("WITH j AS ({jobs}), e AS ({events}) {lane}");
                    let q = bind_events(bind_jobs(sqlx::query(&sql), chunk), chunk);
                    if let Some(row) = q.bind(tenant_id).fetch_optional(&mut *tx.tx).await? {
                        locked = Some(audit::lanes::lane_locked(tenant_id, row)?);
                    }
                }
                None => {
                    let sql = format!("WITH j AS ({jobs}) {events}");
                    bind_events(bind_jobs(sqlx::query(&sql), chunk), chunk)
                        .execute(&mut *tx.tx)
                        .await?;
                }
            },
            Dialect::Sqlite => {
                bind_jobs(sqlx::query(&jobs), chunk)
                    .execute(&mut *tx.tx)
                    .await?;
                bind_events(sqlx::query(&events), chunk)
                    .execute(&mut *tx.tx)
                    .await?;
            }
        }
    }
    Ok(locked)
}

fn bind_jobs<'q>(mut q: Query<'q>, chunk: &'q [NewJob<'_>]) -> Query<'q> {
    for NewJob {
        tenant_id,
        job: j,
        gives: profile,
        priority,
    } in chunk
    {
        q = q
            .bind(&j.id)
            .bind(tenant_id.to_string())
            .bind(&j.queue_id)
            .bind(&j.group_id)
            .bind(&j.user_id)
            .bind(&j.username)
            .bind(&j.name)
            .bind(&j.command)
            .bind(j.image.clone())
            .bind(serde_json::to_string(&j.env).unwrap_or_else(|_| "{}".into()))
            .bind(j.gpu_milli)
            .bind(profile.gpu_memory_mb)
            .bind(profile.cpu_milli)
            .bind(profile.memory_mb)
            .bind(&j.priority_class)
            .bind(*priority)
            .bind(flag(j.preemptible))
            .bind(j.abort_kind.map(AbortKind::as_str))
            .bind(j.abort_command.clone())
            .bind(j.abort_timeout_ms)
            .bind(j.checkpoint_dir.clone())
            .bind(j.max_runtime_ms)
            .bind(j.duration_ms)
            .bind(j.serve.as_ref().map(|s| s.endpoint_id.clone()))
            .bind(j.serve.as_ref().map(|s| s.port))
            .bind(JobState::Queued.as_str())
            .bind(j.submitted_at)
            .bind(j.queued_at)
            .bind(j.submitted_at);
    }
    q
}

fn bind_events<'q>(mut q: Query<'q>, chunk: &'q [NewJob<'_>]) -> Query<'q> {
    for NewJob {
        tenant_id, job: j, ..
    } in chunk
    {
        q = q
            .bind(new_id())
            .bind(tenant_id.to_string())
            .bind(&j.id)
            .bind(j.submitted_at)
            .bind(None::<String>)
            .bind(JobState::Queued.as_str())
            .bind("submitted");
    }
    q
}
