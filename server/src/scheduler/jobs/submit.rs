//! Submitting jobs: validating a request against its queue, profile and caps, and storing it (single or batch, in one transaction with the audit entry).

use serde_json::json;

use app::access::Action;
use app::model::*;

use super::caps::PendingCaps;
use super::group_commit;
use super::idempotency::{self, Claim, IdemKey};
use super::insert::{insert_jobs, Gives, Head, NewJob};
use super::*;
use crate::audit;
use crate::http::error::{ApiError, ApiResult, AppError, FieldError, Validator};
use crate::http::require;
use crate::http::text::{clean_multiline, clean_text, UNCLEAN};
use crate::policy::{get_profile, get_queue, pool_fits, valid_amount, PoolFit};
use crate::store::{new_id, Dialect, Store};
use std::sync::Arc;

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

async fn queue_ctx(store: &Store, p: &Principal, queue_id: &str) -> ApiResult<Arc<QueueCtx>> {
    // The queue, profile and pool shapes as the last submit read them, unless configuration
    // changed since (store/config_cache.rs); who may use the queue is checked every time.
    let cached = store.config.get::<QueueCtx>(p.tenant_id(), queue_id);
    let generation = store.config.generation();
    let ctx = match cached {
        Some(ctx) => ctx,
        None => {
            let ctx = Arc::new(read_queue_ctx(store, p, queue_id).await?);
            store
                .config
                .put(p.tenant_id(), queue_id, generation, ctx.clone());
            ctx
        }
    };
    let queue = &ctx.queue;
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
    Ok(ctx)
}

/// The queue, its profile and its pools' shapes, from the store.
async fn read_queue_ctx(store: &Store, p: &Principal, queue_id: &str) -> ApiResult<QueueCtx> {
    let queue = match get_queue(store, p, queue_id).await {
        Err(ApiError(AppError::NotFound)) => {
            return Err(AppError::field("queue_id", "no such queue in your organization").into())
        }
        other => other?,
    };
    let profile = get_profile(store, p, &queue.profile_id).await?;
    let host = profile.cpu_milli > 0 || profile.memory_mb > 0;
    let fits = pool_fits(store, p, &queue.pools, host).await?;
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
            AbortKind::parse(&a.kind).is_some(),
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
    v.check(
        input
            .serve
            .as_ref()
            .is_none_or(|s| (1024..=65535).contains(&s.port)),
        "serve.port",
        "must be between 1024 and 65535",
    );
    v.finish()?;
    // Gangs across nodes are not scheduled: the job must fit on one node of one of its pools.
    if !ctx
        .fits
        .iter()
        .any(|f| f.fits(gpu_milli, profile.gpu_memory_mb, 0, 0))
    {
        return Err(AppError::field(
            "gpu_milli",
            "no node of the queue's pools is large enough; multi-node jobs are not supported",
        ));
    }
    if !ctx.fits.iter().any(|f| {
        f.fits(
            gpu_milli,
            profile.gpu_memory_mb,
            profile.cpu_milli,
            profile.memory_mb,
        )
    }) {
        return Err(AppError::field(
            "gpu_milli",
            format!(
                "no node of the queue's pools has these GPUs together with the {} CPU cores and {} MiB of memory that the queue's profile {} gives every job",
                profile.cpu_milli as f64 / 1000.0,
                profile.memory_mb,
                profile.name
            ),
        ));
    }
    let class = class.unwrap_or_else(|| PriorityClass {
        name: class_name.clone(),
        priority: 50,
        preemptible: true,
    });
    let (abort_kind, abort_command, abort_timeout_ms) = match input.abort {
        Some(a) => (
            AbortKind::parse(&a.kind),
            Some(a.command),
            a.timeout_ms.unwrap_or(30_000),
        ),
        None => (None, None, 0),
    };
    let mut env = input.env;
    if let Some(s) = &input.serve {
        env.entry("PORT".into())
            .or_insert_with(|| s.port.to_string());
    }
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
        env,
        gpu_milli,
        priority_class: class.name,
        preemptible: class.preemptible,
        state: JobState::Queued,
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
        estimated_start_at: None,
        serve: input.serve,
    })
}

fn priority_of(ctx: &QueueCtx, job: &Job) -> i64 {
    ctx.queue
        .classes
        .iter()
        .find(|c| c.name == job.priority_class)
        .map(|c| c.priority as i64)
        .unwrap_or(50)
}

/// Validates and stores a new job (state `queued`) with its event and audit entry. The
/// checks that need no lock run here, concurrently with other requests; the write joins the
/// next group commit ([`group_commit`]), which checks the idempotency key and the caps against
/// what is committed and what the same commit stores before it.
pub async fn submit(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: SubmitJob,
    caps: PendingCaps,
    key: Option<&IdemKey>,
) -> ApiResult<Submitted<Job>> {
    require(p, Action::SubmitJobs)?;
    let ctx = queue_ctx(store, p, &input.queue_id).await?;
    if let Some(s) = &input.serve {
        crate::gateway::endpoints::check_deploy(store, p, &s.endpoint_id).await?;
    }
    let now = store.now();
    let job = prepare(&ctx, p, input, now)?;
    let summary = json!({"name": job.name, "queue": job.queue_name, "gpu_milli": job.gpu_milli, "priority_class": job.priority_class});
    let pending = group_commit::Pending {
        tenant_id: p.tenant_id().to_string(),
        user_id: p.user_id().to_string(),
        actor: audit::Actor::of(p),
        meta: meta.clone(),
        caps,
        key: key.cloned(),
        gives: Gives::of(&ctx.profile),
        priority: priority_of(&ctx, &job),
        summary,
        job,
    };
    match group_commit::commit(store, pending).await? {
        group_commit::Outcome::Created(job) => Ok(Submitted {
            value: *job,
            replayed: false,
        }),
        group_commit::Outcome::Replay(ids) => {
            let mut jobs = super::get_jobs(store, p, &ids).await?;
            let job = jobs.pop().ok_or(AppError::NotFound)?;
            Ok(Submitted {
                value: job,
                replayed: true,
            })
        }
    }
}

/// What a submit answers: the jobs, and whether they were created by an earlier request with
/// the same idempotency key (a replay creates nothing).
pub struct Submitted<T> {
    pub value: T,
    pub replayed: bool,
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
    key: Option<&IdemKey>,
) -> ApiResult<Submitted<Vec<Job>>> {
    require(p, Action::SubmitJobs)?;
    if input.jobs.is_empty() || input.jobs.len() > MAX_BATCH {
        return Err(
            AppError::field("jobs", format!("send 1 to {MAX_BATCH} jobs per batch")).into(),
        );
    }
    let now = store.now();
    let mut queues: std::collections::HashMap<String, Arc<QueueCtx>> = Default::default();
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
        if let Some(s) = &job.serve {
            match crate::gateway::endpoints::check_deploy(store, p, &s.endpoint_id).await {
                Ok(()) => {}
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
        match prepare(ctx, p, job, now) {
            Ok(j) => {
                let priority = priority_of(ctx, &j);
                items.push((j, Gives::of(&ctx.profile), priority));
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
    if let Some(k) = key {
        if let Claim::Replay(ids) =
            idempotency::claim(&mut tx, p.tenant_id(), p.user_id(), k, now).await?
        {
            drop(tx);
            return Ok(Submitted {
                value: super::get_jobs(store, p, &ids).await?,
                replayed: true,
            });
        }
    }
    let new: Vec<&Job> = items.iter().map(|(j, _, _)| j).collect();
    self::caps::check(&mut tx, caps, p.tenant_id(), p.user_id(), &new).await?;
    let rows: Vec<NewJob> = items
        .iter()
        .map(|(job, gives, priority)| NewJob {
            tenant_id: p.tenant_id(),
            job,
            gives: *gives,
            priority: *priority,
        })
        .collect();
    // PostgreSQL: a lane of the tenant's `api` chain that no other batch holds (see
    // `audit::lanes`); where none is free, `api` itself, the missing lanes opened meanwhile.
    let head = match insert_jobs(&mut tx, &rows, Some(Head::FreeLane(p.tenant_id()))).await? {
        None if store.dialect == Dialect::Postgres => {
            Some(audit::lanes::open_missing(&mut tx, now, p.tenant_id()).await?)
        }
        head => head,
    };
    let chain = head.as_ref().map_or(audit::Chain::Api, |h| h.chain);
    if let Some(k) = key {
        let ids: Vec<&str> = items.iter().map(|(j, _, _)| j.id.as_str()).collect();
        idempotency::remember(&mut tx, p.tenant_id(), p.user_id(), k, &ids).await?;
    }
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
    let actor = audit::Actor::of(p);
    let each: Vec<(&audit::Actor, &RequestMeta, &audit::BatchRecord)> =
        records.iter().map(|r| (&actor, meta, r)).collect();
    audit::append_each_locked(&mut tx, now, chain, &each, head).await?;
    tx.wake_scheduler();
    tx.commit().await?;
    Ok(Submitted {
        value: items.into_iter().map(|(j, _, _)| j).collect(),
        replayed: false,
    })
}
