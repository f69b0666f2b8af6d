//! Jobs: submitted to a queue by a member of its group, scheduled by the driver, run by the
//! pool's executor. Every state transition is one transaction with its `job_events` row and its
//! audit entry.
//!
//! States: `queued` → `admitted` (decision committed) → `starting` (handed to the executor) →
//! `running` → `succeeded` | `failed`; `running` → `preempting` (abort callback, then stop) →
//! `preempted` → `queued` again with `resume_count + 1`; any live state → `aborted` (by its user
//! or an admin) or `lost` (the executor lost it).

pub mod caps;

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use self::caps::PendingCaps;
use crate::api::error::{ApiError, ApiResult, AppError, FieldError, Validator};
use crate::api::text::{clean_multiline, clean_text, UNCLEAN};
use crate::audit;
use crate::clock::now_ms;
use crate::identity::require;
use crate::policy::{get_profile, get_queue, pool_fits, valid_amount, PoolFit};
use crate::store::STATEMENT_PARAMS;
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

fn env_key_ok(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 128
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !k.as_bytes()[0].is_ascii_digit()
        && !k.starts_with("SWITCHYARD_")
}

/// What a queue gives every job submitted to it, looked up once per request (a batch of 1,000
/// jobs to one queue reads the queue, its profile and its pools' shapes once).
struct QueueCtx {
    queue: Queue,
    profile: Profile,
    fits: Vec<PoolFit>,
}

async fn queue_ctx(store: &Store, p: &Principal, queue_id: &str) -> ApiResult<QueueCtx> {
    let queue = match get_queue(store, p, queue_id).await {
        Err(ApiError(AppError::NotFound)) => {
            return Err(AppError::field("queue_id", "no such queue in your organization").into())
        }
        other => other?,
    };
    if !crate::access::may_use_queue(store, p, &queue.id, &queue.group_id).await? {
        return Err(AppError::field(
            "queue_id",
            format!(
                "only members of {} (or groups granted `use` on this queue) may submit to it",
                queue.group_name
            ),
        )
        .into());
    }
    let profile = get_profile(store, p, &queue.profile_id).await?;
    let fits = pool_fits(store, p, &queue.pools).await?;
    Ok(QueueCtx {
        queue,
        profile,
        fits,
    })
}

/// Validates one submission against its queue; no I/O. The job it returns is what gets stored.
fn prepare(ctx: &QueueCtx, p: &Principal, input: SubmitJob, now: i64) -> Result<Job, AppError> {
    let (queue, profile) = (&ctx.queue, &ctx.profile);
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
    v.check(clean_text(&name), "name", UNCLEAN);
    v.check(clean_multiline(&input.command), "command", UNCLEAN);
    v.check(
        input.image.as_deref().is_none_or(clean_text),
        "image",
        UNCLEAN,
    );
    v.check(
        input.env.values().all(|val| clean_multiline(val)),
        "env",
        UNCLEAN,
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
        v.check(clean_multiline(&a.command), "abort.command", UNCLEAN);
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
            .is_none_or(crate::nodes::executor::sandbox::checkpoint_path_ok),
        "checkpoint_dir",
        "must be a relative path inside the job's folder (no leading '/', no '..'), at most 1000 characters",
    );
    v.check(
        input.checkpoint_dir.as_deref().is_none_or(clean_text),
        "checkpoint_dir",
        UNCLEAN,
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
    if !ctx
        .fits
        .iter()
        .any(|f| f.fits(gpu_milli, profile.gpu_memory_mb))
    {
        return Err(AppError::field(
            "gpu_milli",
            "no node of the queue's pools is large enough; multi-node jobs are not supported",
        ));
    }
    let class = class.unwrap_or_else(|| PriorityClass {
        name: class_name.clone(),
        priority: 50,
        preemptible: true,
    });
    let (abort_kind, abort_command, abort_timeout_ms) = match input.abort {
        Some(a) => (
            Some(a.kind),
            Some(a.command),
            a.timeout_ms.unwrap_or(30_000),
        ),
        None => (None, None, 0),
    };
    Ok(Job {
        id: new_id(),
        queue_id: queue.id.clone(),
        queue_name: queue.name.clone(),
        group_id: queue.group_id.clone(),
        user_id: p.user_id().to_string(),
        username: p.me.username.clone(),
        name,
        command: input.command,
        image: input.image,
        env: input.env,
        gpu_milli,
        priority_class: class.name,
        preemptible: class.preemptible,
        state: "queued".into(),
        wait_reason: None,
        wait_code: None,
        pool_id: None,
        node_name: None,
        slices: Vec::new(),
        over_quota: false,
        stop_reason: None,
        resume_count: 0,
        exit_code: None,
        detail: None,
        abort_kind,
        abort_command,
        abort_timeout_ms,
        checkpoint_dir: input.checkpoint_dir,
        max_runtime_ms: input.max_runtime_ms,
        duration_ms: input.duration_ms.or(Some(60_000)),
        submitted_at: now,
        queued_at: now,
        started_at: None,
        finished_at: None,
    })
}

const JOB_INSERT_COLUMNS: &str = "id, tenant_id, queue_id, group_id, user_id, username, name, command, image, env, gpu_milli, gpu_memory_mb, priority_class, priority, preemptible,
    abort_kind, abort_command, abort_timeout_ms, checkpoint_dir, max_runtime_ms, duration_ms, state, submitted_at, queued_at, updated_at";
const JOB_INSERT_ARITY: usize = 25;
/// Rows per multi-row insert (25 parameters each; see [`STATEMENT_PARAMS`]).
const INSERT_CHUNK: usize = STATEMENT_PARAMS / JOB_INSERT_ARITY;

fn placeholders(rows: usize, arity: usize) -> String {
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
        out.push(')');
    }
    out
}

/// Stores prepared jobs (state `queued`) and their first event, in multi-row inserts.
async fn insert_jobs(
    tx: &mut WriteTx,
    tenant_id: &str,
    items: &[(Job, i64, i64)],
) -> Result<(), sqlx::Error> {
    for chunk in items.chunks(INSERT_CHUNK) {
        let sql = format!(
            "INSERT INTO jobs ({JOB_INSERT_COLUMNS}) VALUES {}",
            placeholders(chunk.len(), JOB_INSERT_ARITY)
        );
        let mut q = sqlx::query(&sql);
        for (j, gpu_memory_mb, priority) in chunk {
            q = q
                .bind(&j.id)
                .bind(tenant_id)
                .bind(&j.queue_id)
                .bind(&j.group_id)
                .bind(&j.user_id)
                .bind(&j.username)
                .bind(&j.name)
                .bind(&j.command)
                .bind(j.image.clone())
                .bind(serde_json::to_string(&j.env).unwrap_or_else(|_| "{}".into()))
                .bind(j.gpu_milli)
                .bind(*gpu_memory_mb)
                .bind(&j.priority_class)
                .bind(*priority)
                .bind(flag(j.preemptible))
                .bind(j.abort_kind.clone())
                .bind(j.abort_command.clone())
                .bind(j.abort_timeout_ms)
                .bind(j.checkpoint_dir.clone())
                .bind(j.max_runtime_ms)
                .bind(j.duration_ms)
                .bind("queued")
                .bind(j.submitted_at)
                .bind(j.queued_at)
                .bind(j.submitted_at);
        }
        q.execute(&mut *tx.tx).await?;
        let sql = format!(
            "INSERT INTO job_events (id, tenant_id, job_id, at, from_state, to_state, detail) VALUES {}",
            placeholders(chunk.len(), 7)
        );
        let mut q = sqlx::query(&sql);
        for (j, _, _) in chunk {
            q = q
                .bind(new_id())
                .bind(tenant_id)
                .bind(&j.id)
                .bind(j.submitted_at)
                .bind(None::<String>)
                .bind("queued")
                .bind("submitted");
        }
        q.execute(&mut *tx.tx).await?;
    }
    Ok(())
}

fn priority_of(ctx: &QueueCtx, job: &Job) -> i64 {
    ctx.queue
        .classes
        .iter()
        .find(|c| c.name == job.priority_class)
        .map(|c| c.priority as i64)
        .unwrap_or(50)
}

/// Validates and stores a new job (state `queued`) with its event and audit entry.
pub async fn submit(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: SubmitJob,
    caps: PendingCaps,
) -> ApiResult<Job> {
    require(p, Action::SubmitJobs)?;
    let ctx = queue_ctx(store, p, &input.queue_id).await?;
    let now = now_ms();
    let job = prepare(&ctx, p, input, now)?;
    let priority = priority_of(&ctx, &job);
    let mut tx = store.begin_write().await?;
    self::caps::check(&mut tx, caps, p.tenant_id(), p.user_id(), &[&job]).await?;
    let items = [(job, ctx.profile.gpu_memory_mb, priority)];
    insert_jobs(&mut tx, p.tenant_id(), &items).await?;
    let [(job, _, _)] = items;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "job.submit",
        "job",
        &job.id,
        json!({"name": job.name, "queue": job.queue_name, "gpu_milli": job.gpu_milli, "priority_class": job.priority_class}),
    )
    .await?;
    tx.commit().await?;
    Ok(job)
}

/// The most jobs one batch may carry.
pub const MAX_BATCH: usize = 1000;

/// Validates and stores up to [`MAX_BATCH`] jobs in one transaction (all or none), each with
/// its event and audit entry. Field errors name the job: `jobs[3].gpu_milli`.
pub async fn submit_batch(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: SubmitJobs,
    caps: PendingCaps,
) -> ApiResult<Vec<Job>> {
    require(p, Action::SubmitJobs)?;
    if input.jobs.is_empty() || input.jobs.len() > MAX_BATCH {
        return Err(
            AppError::field("jobs", format!("send 1 to {MAX_BATCH} jobs per batch")).into(),
        );
    }
    let now = now_ms();
    let mut queues: std::collections::HashMap<String, QueueCtx> = Default::default();
    let mut errors: Vec<FieldError> = Vec::new();
    let mut items = Vec::with_capacity(input.jobs.len());
    for (i, job) in input.jobs.into_iter().enumerate() {
        if !queues.contains_key(&job.queue_id) {
            match queue_ctx(store, p, &job.queue_id).await {
                Ok(ctx) => {
                    queues.insert(job.queue_id.clone(), ctx);
                }
                Err(ApiError(AppError::Validation(fs))) => {
                    errors.extend(fs.into_iter().map(|f| FieldError {
                        field: format!("jobs[{i}].{}", f.field),
                        message: f.message,
                    }));
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        let Some(ctx) = queues.get(&job.queue_id) else {
            continue;
        };
        match prepare(ctx, p, job, now) {
            Ok(j) => {
                let priority = priority_of(ctx, &j);
                items.push((j, ctx.profile.gpu_memory_mb, priority));
            }
            Err(AppError::Validation(fs)) => errors.extend(fs.into_iter().map(|f| FieldError {
                field: format!("jobs[{i}].{}", f.field),
                message: f.message,
            })),
            Err(e) => return Err(e.into()),
        }
    }
    if !errors.is_empty() {
        errors.truncate(100);
        return Err(AppError::Validation(errors).into());
    }
    let mut tx = store.begin_write().await?;
    let new: Vec<&Job> = items.iter().map(|(j, _, _)| j).collect();
    self::caps::check(&mut tx, caps, p.tenant_id(), p.user_id(), &new).await?;
    insert_jobs(&mut tx, p.tenant_id(), &items).await?;
    let records: Vec<audit::BatchRecord> = items
        .iter()
        .map(|(j, _, _)| audit::BatchRecord {
            tenant_id: p.tenant_id().to_string(),
            action: "job.submit",
            target_kind: "job",
            target_id: j.id.clone(),
            summary: json!({"name": j.name, "queue": j.queue_name, "gpu_milli": j.gpu_milli, "priority_class": j.priority_class}),
        })
        .collect();
    audit::append_many(&mut tx, now, &audit::Actor::of(p), meta, &records).await?;
    tx.commit().await?;
    Ok(items.into_iter().map(|(j, _, _)| j).collect())
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
    #[param(
        pattern = "^(queued|admitted|starting|running|preempting|preempted|succeeded|failed|aborted|lost)$"
    )]
    pub state: Option<String>,
    /// Only this queue.
    pub queue_id: Option<String>,
    /// Only the caller's own jobs (admins see all by default).
    pub mine: Option<bool>,
    /// Page size, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
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
