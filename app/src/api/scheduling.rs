//! Server functions of the policy pages and the portal: pools, profiles, policies, queues, jobs.

use super::*;

/// An optional whole number from a form field: empty is `None`, anything else must parse.
#[cfg(feature = "ssr")]
fn int_field(field: &str, value: &str) -> Result<Option<i64>, AppError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    v.parse::<i64>().map(Some).map_err(|_| {
        // All digits, yet no 64-bit number: too large (or small), not "not a number".
        let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            let word = if v.starts_with('-') {
                "too small"
            } else {
                "too large"
            };
            AppError::field(field, format!("is {word}"))
        } else {
            AppError::field(field, "must be a whole number")
        }
    })
}

#[cfg(feature = "ssr")]
fn text_field(value: String) -> Option<String> {
    (!value.trim().is_empty()).then_some(value)
}

#[server(prefix = "/_sf", endpoint = "scheduling/overview")]
pub async fn load_policy_overview() -> Result<PolicyOverview, AppError> {
    ctx::reading(|c| async move { c.backend.policy_overview(&c.principal).await }).await
}

#[server(prefix = "/_sf", endpoint = "scheduling/config")]
pub async fn load_policy_config() -> Result<PolicyConfig, AppError> {
    ctx::reading(|c| async move { c.backend.policy_config(&c.principal).await }).await
}

#[server(prefix = "/_sf", endpoint = "portal")]
pub async fn load_portal() -> Result<PortalOverview, AppError> {
    ctx::reading(|c| async move { c.backend.portal_overview(&c.principal).await }).await
}

#[server(prefix = "/_sf", endpoint = "jobs/list")]
pub async fn list_jobs(query: JobQuery) -> Result<Page<Job>, AppError> {
    ctx::reading(move |c| async move { c.backend.list_jobs(&c.principal, query).await }).await
}

#[server(prefix = "/_sf", endpoint = "jobs/detail")]
pub async fn load_job(job_id: String) -> Result<JobDetail, AppError> {
    ctx::reading(move |c| async move { c.backend.job_detail(&c.principal, &job_id).await }).await
}

/// The portal's submit form. Times are in seconds here; the API takes milliseconds.
#[server(prefix = "/_sf", endpoint = "jobs/submit")]
pub async fn submit_job_form(
    csrf: String,
    queue_id: String,
    name: String,
    command: String,
    gpu_milli: String,
    priority_class: String,
    duration_s: String,
    max_runtime_s: String,
    checkpoint_dir: String,
    abort_kind: String,
    abort_command: String,
    abort_timeout_s: String,
    #[server(default)] idempotency_key: Option<String>,
) -> Result<Job, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let gpu_milli = int_field("gpu_milli", &gpu_milli)?;
        // Checked and in range here, in the form's own unit and field names: `s * 1000`
        // on a huge or negative number would overflow (a panic, or a silent wrap).
        let duration_ms = form::seconds_as_ms("duration_s", &duration_s, form::DURATION_S)?;
        let max_runtime_ms =
            form::seconds_as_ms("max_runtime_s", &max_runtime_s, form::MAX_RUNTIME_S)?;
        let abort_timeout =
            form::seconds_as_ms("abort_timeout_s", &abort_timeout_s, form::ABORT_TIMEOUT_S)?;
        let abort = text_field(abort_command).map(|command| AbortSpec {
            kind: if abort_kind.is_empty() {
                "bash".into()
            } else {
                abort_kind
            },
            command,
            timeout_ms: abort_timeout,
        });
        let input = SubmitJob {
            queue_id,
            name,
            command,
            image: None,
            env: Default::default(),
            gpu_milli,
            priority_class: text_field(priority_class),
            abort,
            checkpoint_dir: text_field(checkpoint_dir),
            max_runtime_ms,
            duration_ms,
            serve: None,
        };
        let key = idempotency_key.filter(|k| !k.is_empty());
        c.backend
            .submit_job(&c.principal, &c.meta, input, key)
            .await
    })
    .await
}

/// Submits a copy of a job (its queue, name, command, image, environment, GPUs, class, abort
/// callback, checkpoint folder and limits), checked like any submit, and opens the copy's
/// page. The copy's idempotency key is the original's id: pressing the button again (a double
/// click, a reload) opens the same copy instead of making another.
#[server(prefix = "/_sf", endpoint = "jobs/resubmit")]
pub async fn resubmit_job_form(csrf: String, job_id: String) -> Result<Job, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let j = c.backend.job_detail(&c.principal, &job_id).await?.job;
        let abort = j.abort_command.map(|command| crate::model::AbortSpec {
            kind: j
                .abort_kind
                .map(|k| k.as_str().to_string())
                .unwrap_or_default(),
            command,
            timeout_ms: Some(j.abort_timeout_ms),
        });
        let input = SubmitJob {
            queue_id: j.queue_id,
            name: j.name,
            command: j.command,
            image: j.image,
            env: j.env,
            gpu_milli: Some(j.gpu_milli),
            priority_class: Some(j.priority_class),
            abort,
            checkpoint_dir: j.checkpoint_dir,
            max_runtime_ms: j.max_runtime_ms,
            duration_ms: j.duration_ms,
            serve: j.serve,
        };
        let key = Some(format!("resubmit-{job_id}"));
        let copy = c
            .backend
            .submit_job(&c.principal, &c.meta, input, key)
            .await?;
        leptos_axum::redirect(&format!("/portal/jobs/{}", copy.id));
        Ok(copy)
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "jobs/abort")]
pub async fn abort_job_form(csrf: String, job_id: String) -> Result<Job, AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.abort_job(&c.principal, &c.meta, &job_id).await
    })
    .await
}

/// A pool of identical nodes (the API takes any list of nodes).
#[server(prefix = "/_sf", endpoint = "pools/create")]
pub async fn create_pool_form(
    csrf: String,
    name: String,
    executor: String,
    node_count: String,
    gpus_per_node: String,
    gpu_model: String,
    gpu_memory_mb: String,
    gpu_hour_cost_cents: String,
    shared: Option<String>,
) -> Result<Pool, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let count = int_field("nodes", &node_count)?.unwrap_or(0);
        if !(1..=5000).contains(&count) {
            return Err(AppError::field("nodes", "give 1 to 5000 nodes"));
        }
        let gpus = int_field("gpus_per_node", &gpus_per_node)?.unwrap_or(0);
        if !(0..=16).contains(&gpus) {
            return Err(AppError::field("gpus_per_node", "must be between 0 and 16"));
        }
        let memory = int_field("gpu_memory_mb", &gpu_memory_mb)?.unwrap_or(0);
        if !(0..=1_048_576).contains(&memory) {
            return Err(AppError::field(
                "gpu_memory_mb",
                "must be between 0 and 1048576",
            ));
        }
        let prefix = name.trim().to_string();
        let nodes = (1..=count)
            .map(|i| PoolNode {
                name: format!("{prefix}-{i}"),
                gpus: gpus as u32,
                gpu_model: gpu_model.trim().to_string(),
                gpu_memory_mb: memory as u32,
                cpu_cores: 0,
                memory_mb: 0,
            })
            .collect();
        let input = CreatePool {
            name,
            executor,
            nodes,
            gpu_hour_cost_cents: int_field("gpu_hour_cost_cents", &gpu_hour_cost_cents)?
                .unwrap_or(0),
            shared: shared.is_some(),
        };
        c.backend.create_pool(&c.principal, &c.meta, input).await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "profiles/create")]
pub async fn create_profile_form(
    csrf: String,
    name: String,
    gpu_milli: String,
    min_gpu_milli: String,
    max_gpu_milli: String,
) -> Result<Profile, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = CreateProfile {
            name,
            gpu_milli: int_field("gpu_milli", &gpu_milli)?.unwrap_or(0),
            min_gpu_milli: int_field("min_gpu_milli", &min_gpu_milli)?,
            max_gpu_milli: int_field("max_gpu_milli", &max_gpu_milli)?,
            ..Default::default()
        };
        c.backend.create_profile(&c.principal, &c.meta, input).await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "policies/set")]
pub async fn set_policy_form(
    csrf: String,
    group_id: String,
    reservation_milli: String,
    limit_milli: String,
    over_quota_weight: String,
    over_quota_allowed: Option<String>,
) -> Result<Policy, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = SetPolicy {
            group_id,
            reservation_milli: int_field("reservation_milli", &reservation_milli)?
                .ok_or_else(|| AppError::field("reservation_milli", "required"))?,
            limit_milli: int_field("limit_milli", &limit_milli)?
                .ok_or_else(|| AppError::field("limit_milli", "required"))?,
            over_quota_weight: int_field("over_quota_weight", &over_quota_weight)?.unwrap_or(1),
            over_quota_allowed: over_quota_allowed.is_some(),
            exceed_users: Vec::new(),
            pools: None,
        };
        c.backend.set_policy(&c.principal, &c.meta, input).await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "queues/create")]
pub async fn create_queue_form(
    csrf: String,
    name: String,
    policy_id: String,
    profile_id: String,
    pool: String,
    spillover: String,
    over_quota: Option<String>,
) -> Result<Queue, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let pools = [pool, spillover]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
        let input = CreateQueue {
            name,
            policy_id,
            profile_id,
            pools,
            over_quota: over_quota.is_some(),
            classes: None,
            min_runtime_ms: None,
        };
        c.backend.create_queue(&c.principal, &c.meta, input).await
    })
    .await
}
