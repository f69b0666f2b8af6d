//! Jobs: submitted to a queue by a member of its group, scheduled by the driver, run by the
//! pool's executor. Every state transition is one transaction with its `job_events` row and its
//! audit entry.
//!
//! States: `queued` → `admitted` (decision committed) → `starting` (handed to the executor) →
//! `running` → `succeeded` | `failed`; `running` → `preempting` (abort callback, then stop) →
//! `preempted` → `queued` again with `resume_count + 1`; any live state → `aborted` (by its user
//! or an admin) or `lost` (the executor lost it).

pub mod caps;
pub mod idempotency;

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use crate::audit;
use crate::http::error::{ApiResult, AppError};
use crate::http::require;
use crate::store::{corrupt, new_id, opt_text_enum, text_enum, Dialect, Store, WriteTx};

mod estimate;
mod group_commit;
mod insert;
mod submit;
mod waiting;
pub use submit::*;

pub const JOB_SELECT: &str = "SELECT j.id, j.queue_id, q.name AS queue_name, j.group_id, j.user_id, j.username, j.name, j.command, j.image, j.env, j.gpu_milli,
    j.priority_class, j.preemptible, j.state, j.wait_reason, j.wait_code, j.pool_id, j.node_name, j.slices, j.over_quota, j.stop_reason, j.resume_count,
    j.exit_code, j.detail, j.abort_kind, j.abort_command, j.abort_timeout_ms, j.checkpoint_dir, j.max_runtime_ms, j.duration_ms, j.submitted_at, j.queued_at,
    j.started_at, j.finished_at, j.serve_endpoint_id, j.serve_port FROM jobs j JOIN queues q ON q.id = j.queue_id";

pub fn job_from_row(r: &AnyRow) -> Result<Job, sqlx::Error> {
    let env: String = r.try_get("env")?;
    let slices: Option<String> = r.try_get("slices")?;
    let env = serde_json::from_str(&env).map_err(|e| corrupt("env", e))?;
    let slices = match slices {
        Some(s) => serde_json::from_str(&s).map_err(|e| corrupt("slices", e))?,
        None => Vec::new(),
    };
    Ok(Job {
        id: r.try_get("id")?,
        queue_id: r.try_get("queue_id")?,
        queue_name: r.try_get("queue_name")?,
        group_id: r.try_get("group_id")?,
        user_id: r.try_get("user_id")?,
        username: r.try_get("username")?,
        name: r.try_get("name")?,
        command: r.try_get("command")?,
        image: r.try_get("image")?,
        env,
        gpu_milli: r.try_get("gpu_milli")?,
        priority_class: r.try_get("priority_class")?,
        preemptible: r.try_get::<i64, _>("preemptible")? != 0,
        state: text_enum(r, "state")?,
        wait_reason: r.try_get("wait_reason")?,
        wait_code: r.try_get("wait_code")?,
        pool_id: r.try_get("pool_id")?,
        node_name: r.try_get("node_name")?,
        slices,
        over_quota: r.try_get::<i64, _>("over_quota")? != 0,
        stop_reason: opt_text_enum(r, "stop_reason")?,
        resume_count: r.try_get("resume_count")?,
        exit_code: r.try_get("exit_code")?,
        detail: r.try_get("detail")?,
        abort_kind: opt_text_enum(r, "abort_kind")?,
        abort_command: r.try_get("abort_command")?,
        abort_timeout_ms: r.try_get("abort_timeout_ms")?,
        checkpoint_dir: r.try_get("checkpoint_dir")?,
        max_runtime_ms: r.try_get("max_runtime_ms")?,
        duration_ms: r.try_get("duration_ms")?,
        submitted_at: r.try_get("submitted_at")?,
        queued_at: r.try_get("queued_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
        estimated_start_at: None,
        serve: match (
            r.try_get::<Option<String>, _>("serve_endpoint_id")?,
            r.try_get::<Option<i64>, _>("serve_port")?,
        ) {
            (Some(endpoint_id), Some(port)) => Some(Serve { endpoint_id, port }),
            _ => None,
        },
    })
}

/// Writes one `job_events` row inside the caller's transaction.
pub async fn event(
    tx: &mut WriteTx,
    tenant_id: &str,
    job_id: &str,
    at: i64,
    from: Option<JobState>,
    to: JobState,
    detail: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO job_events (id, tenant_id, job_id, at, from_state, to_state, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)")
        .bind(new_id())
        .bind(tenant_id)
        .bind(job_id)
        .bind(at)
        .bind(from.map(JobState::as_str))
        .bind(to.as_str())
        .bind(detail)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// Members see their own jobs; tenant admins see every job of the tenant. The value to bind
/// to `$2` in `($2 = '' OR j.user_id = $2)`.
fn visible_user(p: &Principal, mine: bool) -> String {
    if (p.me.is_tenant_admin || p.me.is_platform_admin) && !mine {
        String::new()
    } else {
        p.user_id().to_string()
    }
}

#[derive(Clone, Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobFilter {
    /// Only this state. `preempted`: jobs that were preempted and wait in the queue to resume.
    #[param(
        pattern = "^(queued|admitted|starting|running|preempting|preempted|succeeded|failed|aborted|lost)$"
    )]
    pub state: Option<String>,
    /// Only this queue.
    pub queue_id: Option<String>,
    /// Only this group's jobs.
    pub group_id: Option<String>,
    /// Only this user's jobs (username; admins).
    pub user: Option<String>,
    /// Only jobs whose name contains this (any case).
    pub q: Option<String>,
    /// Only the caller's own jobs (admins see all by default).
    pub mine: Option<bool>,
    /// Only jobs submitted in the last `hour`, `day` or `week`.
    #[param(pattern = "^(hour|day|week)$")]
    pub within: Option<String>,
    /// `newest` first (the default), `oldest` first, or `queue`: the scheduler's order within a
    /// queue (priority, then submit time), the waiting order with `state=queued&queue_id=…`.
    #[param(pattern = "^(newest|oldest|queue)$")]
    pub sort: Option<String>,
    /// Page size, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page (jobs come newest first).
    pub cursor: Option<String>,
}

/// The order of a job list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Newest,
    Oldest,
    /// The scheduler's order within a queue: priority (high first), then submit time.
    Queue,
}

pub async fn list_jobs(store: &Store, p: &Principal, f: &JobFilter) -> ApiResult<Page<Job>> {
    require(p, Action::SubmitJobs)?;
    let limit = f.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(AppError::field("limit", "must be between 1 and 500").into());
    }
    if let Some(s) = &f.state {
        if JobState::parse(s).is_none() {
            return Err(AppError::field("state", "not a job state").into());
        }
    }
    if f.q.as_ref().is_some_and(|q| q.chars().count() > 200) {
        return Err(AppError::field("q", "at most 200 characters").into());
    }
    let within_ms = match f.within.as_deref().filter(|w| !w.is_empty()) {
        None => None,
        Some("hour") => Some(3_600_000),
        Some("day") => Some(86_400_000),
        Some("week") => Some(7 * 86_400_000),
        Some(_) => {
            return Err(AppError::field("within", "must be hour, day or week").into());
        }
    };
    let order = match f.sort.as_deref().filter(|s| !s.is_empty()) {
        None | Some("newest") => Order::Newest,
        Some("oldest") => Order::Oldest,
        Some("queue") => Order::Queue,
        Some(_) => {
            return Err(AppError::field("sort", "must be newest, oldest or queue").into());
        }
    };
    // The name search as a LIKE pattern, its wildcards taken literally.
    let pattern =
        f.q.as_deref()
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(|q| {
                let escaped = q
                    .to_lowercase()
                    .replace('\\', "\\\\")
                    .replace('%', "\\%")
                    .replace('_', "\\_");
                format!("%{escaped}%")
            })
            .unwrap_or_default();
    // Only the filters given, so that the planner can use the per-user and per-tenant indexes
    // (an `($n = '' OR …)` form hides them from PostgreSQL's).
    let mut conditions = vec!["j.tenant_id = $1".to_string()];
    let mut binds: Vec<String> = vec![p.tenant_id().to_string()];
    let mut add = |conditions: &mut Vec<String>, condition: &str, value: String| {
        binds.push(value);
        conditions.push(condition.replace("$?", &format!("${}", binds.len())));
    };
    let user = visible_user(p, f.mine.unwrap_or(false));
    if !user.is_empty() {
        add(&mut conditions, "j.user_id = $?", user);
    }
    match f.state.as_deref().filter(|s| !s.is_empty()) {
        // Preempted jobs wait in the queue to resume.
        Some("preempted") => conditions.push("j.state = 'queued' AND j.resume_count > 0".into()),
        Some(state) => add(&mut conditions, "j.state = $?", state.to_string()),
        None => {}
    }
    let given = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    if let Some(v) = given(&f.queue_id) {
        add(&mut conditions, "j.queue_id = $?", v);
    }
    if let Some(v) = given(&f.group_id) {
        add(&mut conditions, "j.group_id = $?", v);
    }
    if let Some(v) = given(&f.user) {
        add(&mut conditions, "j.username = $?", v);
    }
    if !pattern.is_empty() {
        add(
            &mut conditions,
            "LOWER(j.name) LIKE $? ESCAPE '\\'",
            pattern,
        );
    }
    if let Some(ms) = within_ms {
        let since = store.now() - ms;
        add(
            &mut conditions,
            "j.submitted_at >= CAST($? AS BIGINT)",
            since.to_string(),
        );
    }
    // The cursor is the last id of the previous page. Ids grow with time; in queue order the
    // page goes on after that job's (priority, submit time, id).
    if let Some(v) = given(&f.cursor) {
        let after = match order {
            Order::Newest => "j.id < $?",
            Order::Oldest => "j.id > $?",
            Order::Queue => {
                "(j.priority < (SELECT c.priority FROM jobs c WHERE c.id = $?)
                  OR (j.priority = (SELECT c.priority FROM jobs c WHERE c.id = $?)
                      AND (j.submitted_at > (SELECT c.submitted_at FROM jobs c WHERE c.id = $?)
                           OR (j.submitted_at = (SELECT c.submitted_at FROM jobs c WHERE c.id = $?) AND j.id > $?))))"
            }
        };
        add(&mut conditions, after, v);
    }
    let sql = format!(
        "{JOB_SELECT} WHERE {} ORDER BY {} LIMIT {}",
        conditions.join(" AND "),
        match order {
            Order::Newest => "j.id DESC",
            Order::Oldest => "j.id ASC",
            Order::Queue => "j.priority DESC, j.submitted_at ASC, j.id ASC",
        },
        limit + 1
    );
    let mut q = sqlx::query(&sql);
    for b in binds {
        q = q.bind(b);
    }
    let rows = q.fetch_all(&store.pool).await?;
    let mut items = rows
        .iter()
        .map(job_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    let next_cursor = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        items.last().map(|j| j.id.clone())
    } else {
        None
    };
    if order == Order::Queue && f.state.as_deref() == Some("queued") {
        if let Some(queue_id) = given(&f.queue_id) {
            estimate::fill(store, p, &queue_id, &mut items).await?;
        }
    }
    Ok(Page { items, next_cursor })
}

pub async fn get_job(store: &Store, p: &Principal, id: &str) -> ApiResult<Job> {
    require(p, Action::SubmitJobs)?;
    let row = sqlx::query(&format!(
        "{JOB_SELECT} WHERE j.tenant_id = $1 AND ($2 = '' OR j.user_id = $2) AND j.id = $3"
    ))
    .bind(p.tenant_id())
    .bind(visible_user(p, false))
    .bind(id)
    .fetch_optional(&store.pool)
    .await?;
    let row = row.ok_or(AppError::NotFound)?;
    Ok(job_from_row(&row)?)
}

/// The jobs with these ids the caller may see, in the order of `ids` (a few statements, not
/// one per job).
pub async fn get_jobs(store: &Store, p: &Principal, ids: &[String]) -> ApiResult<Vec<Job>> {
    require(p, Action::SubmitJobs)?;
    let mut found = std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(store.dialect.statement_params() - 2) {
        let list = (0..chunk.len())
            .map(|i| format!("${}", i + 3))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "{JOB_SELECT} WHERE j.tenant_id = $1 AND ($2 = '' OR j.user_id = $2) AND j.id IN ({list})"
        );
        let mut q = sqlx::query(&sql)
            .bind(p.tenant_id())
            .bind(visible_user(p, false));
        for id in chunk {
            q = q.bind(id);
        }
        for r in q.fetch_all(&store.pool).await? {
            let j = job_from_row(&r)?;
            found.insert(j.id.clone(), j);
        }
    }
    Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
}

pub async fn job_detail(store: &Store, p: &Principal, id: &str) -> ApiResult<JobDetail> {
    let job = get_job(store, p, id).await?;
    let rows = sqlx::query("SELECT at, from_state, to_state, detail FROM job_events WHERE tenant_id = $1 AND job_id = $2 ORDER BY at, id")
        .bind(p.tenant_id())
        .bind(id)
        .fetch_all(&store.pool)
        .await?;
    let events = rows
        .iter()
        .map(|r| {
            Ok(JobEvent {
                at: r.try_get("at")?,
                from_state: opt_text_enum(r, "from_state")?,
                to_state: text_enum(r, "to_state")?,
                detail: r.try_get("detail")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let waiting = match job.state {
        JobState::Queued => Some(waiting::waiting(store, p, &job).await?),
        _ => None,
    };
    Ok(JobDetail {
        job,
        events,
        waiting,
    })
}

/// Aborts a job: a queued one at once; a running one is stopped by the driver (its abort
/// callback runs first) and becomes `aborted` when the executor confirms.
pub async fn abort(store: &Store, p: &Principal, meta: &RequestMeta, id: &str) -> ApiResult<Job> {
    let mut job = get_job(store, p, id).await?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    // The state as of this transaction (the scheduler may have moved the job since the read
    // above, e.g. admitted it): writes are serialised (SQLite's lock, PostgreSQL's row lock),
    // so it cannot change again before the update.
    let lock = if store.dialect == Dialect::Postgres {
        " FOR UPDATE"
    } else {
        ""
    };
    let row = sqlx::query(&format!(
        "SELECT state, stop_reason FROM jobs WHERE tenant_id = $1 AND id = $2{lock}"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&mut *tx.tx)
    .await?
    .ok_or(AppError::NotFound)?;
    job.state = text_enum(&row, "state")?;
    job.stop_reason = opt_text_enum(&row, "stop_reason")?;
    if job.state.is_terminal() {
        return Err(
            AppError::Conflict(format!("The job has already ended ({})", job.state)).into(),
        );
    }
    if job.stop_reason == Some(StopReason::Abort) {
        return Err(AppError::Conflict("The job is already being aborted".into()).into());
    }
    let to = if matches!(job.state, JobState::Queued | JobState::Admitted) {
        JobState::Aborted
    } else {
        job.state
    };
    let changed = sqlx::query(&format!("UPDATE jobs SET state = $1, stop_reason = 'abort', finished_at = CASE WHEN $1 = 'aborted' THEN $2 ELSE finished_at END, wait_code = NULL, wait_reason = NULL, updated_at = $2, {} WHERE tenant_id = $3 AND id = $4 AND state = $5", crate::scheduler::changes::set_change(tx.dialect)))
        .bind(to.as_str())
        .bind(now)
        .bind(p.tenant_id())
        .bind(id)
        .bind(job.state.as_str())
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
    if changed == 0 {
        return Err(AppError::Conflict("The job changed meanwhile; try again".into()).into());
    }
    let detail = format!("aborted by {}", p.me.username);
    if to == JobState::Aborted {
        event(
            &mut tx,
            p.tenant_id(),
            id,
            now,
            Some(job.state),
            JobState::Aborted,
            &detail,
        )
        .await?;
    } else {
        event(
            &mut tx,
            p.tenant_id(),
            id,
            now,
            Some(job.state),
            job.state,
            &format!("{detail}: stopping"),
        )
        .await?;
    }
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "job.abort",
        "job",
        id,
        json!({"name": job.name, "state": job.state}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    get_job(store, p, id).await
}
