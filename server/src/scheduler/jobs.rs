//! Jobs: submitted to a queue by a member of its group, scheduled by the driver, run by the
//! pool's executor. Every state transition is one transaction with its `job_events` row and its
//! audit entry.
//!
//! States: `queued` → `admitted` (decision committed) → `starting` (handed to the executor) →
//! `running` → `succeeded` | `failed`; `running` → `preempting` (abort callback, then stop) →
//! `preempted` → `queued` again with `resume_count + 1`; any live state → `aborted` (by its user
//! or an admin) or `lost` (the executor lost it).

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::resources::{get_pool, get_profile, get_queue, valid_amount};
use crate::api::error::{ApiError, ApiResult, AppError, Validator};
use crate::audit;
use crate::clock::now_ms;
use crate::identity::require;
use crate::store::{flag, new_id, Store, WriteTx};

pub const LIVE: &[&str] = &["queued", "admitted", "starting", "running", "preempting"];
pub const TERMINAL: &[&str] = &["succeeded", "failed", "aborted", "lost"];

pub const JOB_SELECT: &str = "SELECT j.id, j.queue_id, q.name AS queue_name, j.group_id, j.user_id, j.username, j.name, j.command, j.image, j.env, j.gpu_milli,
    j.priority_class, j.preemptible, j.state, j.wait_reason, j.wait_code, j.pool_id, j.node_name, j.slices, j.over_quota, j.stop_reason, j.resume_count,
    j.exit_code, j.detail, j.abort_kind, j.abort_command, j.abort_timeout_ms, j.checkpoint_dir, j.max_runtime_ms, j.duration_ms, j.submitted_at, j.queued_at,
    j.started_at, j.finished_at FROM jobs j JOIN queues q ON q.id = j.queue_id";

pub fn job_from_row(r: &AnyRow) -> Result<Job, sqlx::Error> {
    let env: String = r.try_get("env")?;
    let slices: Option<String> = r.try_get("slices")?;
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
        env: serde_json::from_str(&env).unwrap_or_default(),
        gpu_milli: r.try_get("gpu_milli")?,
        priority_class: r.try_get("priority_class")?,
        preemptible: r.try_get::<i64, _>("preemptible")? != 0,
        state: r.try_get("state")?,
        wait_reason: r.try_get("wait_reason")?,
        wait_code: r.try_get("wait_code")?,
        pool_id: r.try_get("pool_id")?,
        node_name: r.try_get("node_name")?,
        slices: slices
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default(),
        over_quota: r.try_get::<i64, _>("over_quota")? != 0,
        stop_reason: r.try_get("stop_reason")?,
        resume_count: r.try_get("resume_count")?,
        exit_code: r.try_get("exit_code")?,
        detail: r.try_get("detail")?,
        abort_kind: r.try_get("abort_kind")?,
        abort_command: r.try_get("abort_command")?,
        abort_timeout_ms: r.try_get("abort_timeout_ms")?,
        checkpoint_dir: r.try_get("checkpoint_dir")?,
        max_runtime_ms: r.try_get("max_runtime_ms")?,
        duration_ms: r.try_get("duration_ms")?,
        submitted_at: r.try_get("submitted_at")?,
        queued_at: r.try_get("queued_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

/// Writes one `job_events` row inside the caller's transaction.
pub async fn event(
    tx: &mut WriteTx,
    tenant_id: &str,
    job_id: &str,
    at: i64,
    from: Option<&str>,
    to: &str,
    detail: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO job_events (id, tenant_id, job_id, at, from_state, to_state, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)")
        .bind(new_id())
        .bind(tenant_id)
        .bind(job_id)
        .bind(at)
        .bind(from)
        .bind(to)
        .bind(detail)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

async fn is_member(store: &Store, p: &Principal, group_id: &str) -> ApiResult<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM memberships WHERE tenant_id = $1 AND group_id = $2 AND user_id = $3",
    )
    .bind(p.tenant_id())
    .bind(group_id)
    .bind(p.user_id())
    .fetch_one(&store.pool)
    .await?;
    Ok(n > 0)
}

fn env_key_ok(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 128
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !k.as_bytes()[0].is_ascii_digit()
        && !k.starts_with("SWITCHYARD_")
}

/// Validates and stores a new job (state `queued`) with its event and audit entry.
pub async fn submit(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: SubmitJob,
) -> ApiResult<Job> {
    require(p, Action::SubmitJobs)?;
    let queue = match get_queue(store, p, &input.queue_id).await {
        Err(ApiError(AppError::NotFound)) => {
            return Err(AppError::field("queue_id", "no such queue in your organization").into())
        }
        other => other?,
    };
    let admin = p.me.is_tenant_admin || p.me.is_platform_admin;
    if !admin && !is_member(store, p, &queue.group_id).await? {
        return Err(AppError::field(
            "queue_id",
            format!(
                "only members of {} may submit to this queue",
                queue.group_name
            ),
        )
        .into());
    }
    let profile = get_profile(store, p, &queue.profile_id).await?;
    let gpu_milli = if profile.gpu_milli > 0 {
        input.gpu_milli.unwrap_or(profile.gpu_milli)
    } else {
        input.gpu_milli.unwrap_or(profile.min_gpu_milli)
    };
    let name = input.name.trim().to_string();
    let mut v = Validator::default();
    v.check(
        !name.is_empty() && name.chars().count() <= 100,
        "name",
        "must be 1 to 100 characters",
    );
    v.check(
        !input.command.trim().is_empty() && input.command.len() <= 10_000,
        "command",
        "must be 1 to 10000 characters",
    );
    v.check(
        input.image.as_deref().is_none_or(|i| i.len() <= 500),
        "image",
        "must be at most 500 characters",
    );
    v.check(input.env.len() <= 64, "env", "at most 64 variables");
    v.check(
        input
            .env
            .iter()
            .all(|(k, val)| env_key_ok(k) && val.len() <= 4096),
        "env",
        "names are letters, digits and '_' (not SWITCHYARD_*), values at most 4096 bytes",
    );
    if profile.gpu_milli > 0 {
        v.check(
            gpu_milli == profile.gpu_milli,
            "gpu_milli",
            &format!(
                "the queue's profile {} gives every job exactly {} milli-GPUs",
                profile.name, profile.gpu_milli
            ),
        );
    } else {
        v.check(
            (profile.min_gpu_milli..=profile.max_gpu_milli).contains(&gpu_milli),
            "gpu_milli",
            &format!(
                "the queue's profile {} allows {} to {} milli-GPUs",
                profile.name, profile.min_gpu_milli, profile.max_gpu_milli
            ),
        );
    }
    v.check(
        valid_amount(gpu_milli),
        "gpu_milli",
        "use 1 to 999 milli-GPUs (a fraction of one GPU) or whole GPUs (multiples of 1000)",
    );
    let class_name = input.priority_class.clone().unwrap_or_else(|| {
        if queue.classes.iter().any(|c| c.name == "normal") {
            "normal".into()
        } else {
            queue
                .classes
                .first()
                .map(|c| c.name.clone())
                .unwrap_or_default()
        }
    });
    let class = queue.classes.iter().find(|c| c.name == class_name).cloned();
    v.check(
        class.is_some(),
        "priority_class",
        &format!(
            "the queue's classes are {}",
            queue
                .classes
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    if let Some(a) = &input.abort {
        v.check(
            a.kind == "bash" || a.kind == "python",
            "abort.kind",
            "must be `bash` or `python`",
        );
        v.check(
            !a.command.trim().is_empty() && a.command.len() <= 10_000,
            "abort.command",
            "must be 1 to 10000 characters",
        );
        v.check(
            a.timeout_ms.is_none_or(|t| (1..=600_000).contains(&t)),
            "abort.timeout_ms",
            "must be between 1 and 600000",
        );
    }
    v.check(
        input
            .checkpoint_dir
            .as_deref()
            .is_none_or(|d| !d.is_empty() && d.len() <= 1000 && !d.contains('\0')),
        "checkpoint_dir",
        "must be 1 to 1000 characters",
    );
    v.check(
        input
            .max_runtime_ms
            .is_none_or(|t| (1000..=30 * 86_400_000).contains(&t)),
        "max_runtime_ms",
        "must be between 1000 (1 s) and 2592000000 (30 days)",
    );
    v.check(
        input
            .duration_ms
            .is_none_or(|t| (0..=30 * 86_400_000).contains(&t)),
        "duration_ms",
        "must be between 0 and 2592000000 (30 days)",
    );
    v.finish()?;
    // Gangs across nodes are not scheduled: the job must fit on one node of one of its pools.
    let mut fits = false;
    for pool_id in &queue.pools {
        if let Ok(pool) = get_pool(store, p, pool_id).await {
            fits |= pool.nodes.iter().any(|n| {
                let whole = n.gpus as i64 * 1000;
                if gpu_milli < 1000 {
                    n.gpus > 0
                        && (profile.gpu_memory_mb == 0
                            || profile.gpu_memory_mb <= n.gpu_memory_mb as i64)
                } else {
                    gpu_milli <= whole
                }
            });
        }
    }
    if !fits {
        return Err(AppError::field(
            "gpu_milli",
            "no node of the queue's pools is large enough; multi-node jobs are not supported",
        )
        .into());
    }
    let class = class.unwrap_or_else(|| PriorityClass {
        name: class_name.clone(),
        priority: 50,
        preemptible: true,
    });
    let now = now_ms();
    let id = new_id();
    let (abort_kind, abort_command, abort_timeout) = match &input.abort {
        Some(a) => (
            Some(a.kind.clone()),
            Some(a.command.clone()),
            a.timeout_ms.unwrap_or(30_000),
        ),
        None => (None, None, 0),
    };
    let duration = input.duration_ms.or(Some(60_000));
    let mut tx = store.begin_write().await?;
    sqlx::query(
        "INSERT INTO jobs (id, tenant_id, queue_id, group_id, user_id, username, name, command, image, env, gpu_milli, gpu_memory_mb, priority_class, priority, preemptible,
            abort_kind, abort_command, abort_timeout_ms, checkpoint_dir, max_runtime_ms, duration_ms, state, submitted_at, queued_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, 'queued', $22, $22, $22)",
    )
    .bind(&id)
    .bind(p.tenant_id())
    .bind(&queue.id)
    .bind(&queue.group_id)
    .bind(p.user_id())
    .bind(&p.me.username)
    .bind(&name)
    .bind(&input.command)
    .bind(input.image.clone())
    .bind(serde_json::to_string(&input.env).unwrap_or_else(|_| "{}".into()))
    .bind(gpu_milli)
    .bind(profile.gpu_memory_mb)
    .bind(&class.name)
    .bind(class.priority as i64)
    .bind(flag(class.preemptible))
    .bind(abort_kind)
    .bind(abort_command)
    .bind(abort_timeout)
    .bind(input.checkpoint_dir.clone())
    .bind(input.max_runtime_ms)
    .bind(duration)
    .bind(now)
    .execute(&mut *tx.tx)
    .await?;
    event(
        &mut tx,
        p.tenant_id(),
        &id,
        now,
        None,
        "queued",
        "submitted",
    )
    .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "job.submit",
        "job",
        &id,
        json!({"name": name, "queue": queue.name, "gpu_milli": gpu_milli, "priority_class": class.name}),
    )
    .await?;
    tx.commit().await?;
    get_job(store, p, &id).await
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
    /// Only this state.
    pub state: Option<String>,
    /// Only this queue.
    pub queue_id: Option<String>,
    /// Only the caller's own jobs (admins see all by default).
    pub mine: Option<bool>,
    /// Page size, 1 to 500 (default 100).
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page (jobs come newest first).
    pub cursor: Option<String>,
}

pub async fn list_jobs(store: &Store, p: &Principal, f: &JobFilter) -> ApiResult<Page<Job>> {
    require(p, Action::SubmitJobs)?;
    let limit = f.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(AppError::field("limit", "must be between 1 and 500").into());
    }
    if let Some(s) = &f.state {
        if !LIVE.contains(&s.as_str()) && !TERMINAL.contains(&s.as_str()) && s != "preempted" {
            return Err(AppError::field("state", "not a job state").into());
        }
    }
    let sql = format!("{JOB_SELECT} WHERE j.tenant_id = $1 AND ($2 = '' OR j.user_id = $2) AND ($3 = '' OR j.state = $3) AND ($4 = '' OR j.queue_id = $4) AND ($5 = '' OR j.id < $5) ORDER BY j.id DESC LIMIT $6");
    let rows = sqlx::query(&sql)
        .bind(p.tenant_id())
        .bind(visible_user(p, f.mine.unwrap_or(false)))
        .bind(f.state.clone().unwrap_or_default())
        .bind(f.queue_id.clone().unwrap_or_default())
        .bind(f.cursor.clone().unwrap_or_default())
        .bind(limit + 1)
        .fetch_all(&store.pool)
        .await?;
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
                from_state: r.try_get("from_state")?,
                to_state: r.try_get("to_state")?,
                detail: r.try_get("detail")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    Ok(JobDetail { job, events })
}

/// Aborts a job: a queued one at once; a running one is stopped by the driver (its abort
/// callback runs first) and becomes `aborted` when the executor confirms.
pub async fn abort(store: &Store, p: &Principal, meta: &RequestMeta, id: &str) -> ApiResult<Job> {
    let job = get_job(store, p, id).await?;
    if TERMINAL.contains(&job.state.as_str()) {
        return Err(
            AppError::Conflict(format!("The job has already ended ({})", job.state)).into(),
        );
    }
    if job.stop_reason.as_deref() == Some("abort") {
        return Err(AppError::Conflict("The job is already being aborted".into()).into());
    }
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    let to = if job.state == "queued" || job.state == "admitted" {
        "aborted"
    } else {
        job.state.as_str()
    };
    let changed = sqlx::query("UPDATE jobs SET state = $1, stop_reason = 'abort', finished_at = CASE WHEN $1 = 'aborted' THEN $2 ELSE finished_at END, wait_code = NULL, wait_reason = NULL, updated_at = $2 WHERE tenant_id = $3 AND id = $4 AND state = $5")
        .bind(to)
        .bind(now)
        .bind(p.tenant_id())
        .bind(id)
        .bind(&job.state)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
    if changed == 0 {
        return Err(AppError::Conflict("The job changed meanwhile; try again".into()).into());
    }
    let detail = format!("aborted by {}", p.me.username);
    if to == "aborted" {
        event(
            &mut tx,
            p.tenant_id(),
            id,
            now,
            Some(&job.state),
            "aborted",
            &detail,
        )
        .await?;
    } else {
        event(
            &mut tx,
            p.tenant_id(),
            id,
            now,
            Some(&job.state),
            &job.state,
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
    tx.commit().await?;
    get_job(store, p, id).await
}
