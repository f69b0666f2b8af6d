//! Writing prepared jobs: their rows and first events in multi-row inserts. Used by single
//! submits (through the group commit) and by batches.

use app::model::*;

use crate::nodes::executor::AbortKind;
use crate::store::STATEMENT_PARAMS;
use crate::store::{flag, new_id, WriteTx};

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
/// Rows per multi-row insert (29 parameters each; see [`STATEMENT_PARAMS`]).
const INSERT_CHUNK: usize = STATEMENT_PARAMS / JOB_INSERT_ARITY;

/// `rows` rows of `arity` parameters each, each row ending with `last` (an SQL expression)
/// when given.
fn placeholders(rows: usize, arity: usize, last: Option<&str>) -> String {
    let mut out = String::with_capacity(rows * arity * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..arity {
            if c > 0 {
                out.push_str(", ");
            }
            out.push_str(&format!("${}", r * arity + c + 1));
        }
        if let Some(last) = last {
            out.push_str(", ");
            out.push_str(last);
        }
        out.push(')');
    }
    out
}

/// One prepared job to store: its tenant, what its profile gives it, its class's priority.
pub(super) struct NewJob<'a> {
    pub tenant_id: &'a str,
    pub job: &'a Job,
    pub gives: Gives,
    pub priority: i64,
}

/// Stores prepared jobs (state `queued`) and their first event, in multi-row inserts.
pub(super) async fn insert_jobs(tx: &mut WriteTx, items: &[NewJob<'_>]) -> Result<(), sqlx::Error> {
    for chunk in items.chunks(INSERT_CHUNK) {
        let sql = format!(
            "INSERT INTO jobs ({JOB_INSERT_COLUMNS}) VALUES {}",
            placeholders(
                chunk.len(),
                JOB_INSERT_ARITY,
                Some(crate::scheduler::changes::next_change(tx.dialect))
            )
        );
        let mut q = sqlx::query(&sql);
        for NewJob {
            tenant_id,
            job: j,
            gives: profile,
            priority,
        } in chunk
        {
            q = q
                .bind(&j.id)
                .bind(*tenant_id)
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
        q.execute(&mut *tx.tx).await?;
        let sql = format!(
            "INSERT INTO job_events (id, tenant_id, job_id, at, from_state, to_state, detail) VALUES {}",
            placeholders(chunk.len(), 7, None)
        );
        let mut q = sqlx::query(&sql);
        for NewJob {
            tenant_id, job: j, ..
        } in chunk
        {
            q = q
                .bind(new_id())
                .bind(*tenant_id)
                .bind(&j.id)
                .bind(j.submitted_at)
                .bind(None::<String>)
                .bind(JobState::Queued.as_str())
                .bind("submitted");
        }
        q.execute(&mut *tx.tx).await?;
    }
    Ok(())
}
