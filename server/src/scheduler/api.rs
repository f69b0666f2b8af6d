//! REST handlers for resource policies: pools, profiles, policies and queues.
//! Jobs: submit, list, detail with history, abort. Changes wake the scheduler.

use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::model::*;

use super::jobs::idempotency::{self, IdemKey};
use super::jobs::{self, JobFilter};
use crate::config::Config;
use crate::http::error::{ApiResult, Problem};
use crate::http::extract::{ApiJson, ApiQuery};
use crate::http::Caller;
use crate::policy as res;
use crate::scheduler::driver::SchedulerHandle;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
    Arc<Config>: FromRef<S>,
    SchedulerHandle: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list_pools, create_pool))
        .routes(routes!(get_pool))
        .routes(routes!(list_profiles, create_profile))
        .routes(routes!(get_profile))
        .routes(routes!(list_policies, set_policy))
        .routes(routes!(get_policy))
        .routes(routes!(list_queues, create_queue))
        .routes(routes!(get_queue))
        .routes(routes!(list_jobs, submit_job))
        .routes(routes!(submit_jobs))
        .routes(routes!(get_job))
        .routes(routes!(abort_job))
        .routes(routes!(overview))
        .routes(routes!(history))
}

/// The pools the caller's tenant may use: shared ones and its own.
#[utoipa::path(get, path = "/pools", tag = "policies", responses((status = 200, body = Vec<Pool>), (status = 401, body = Problem)))]
async fn list_pools(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<Pool>>> {
    Ok(Json(res::list_pools(&store, &p).await?))
}

/// Declare a pool (shared: platform admins only). `POST` a new one; names are unique across the platform.
#[utoipa::path(post, path = "/pools", tag = "policies", request_body = CreatePool, responses((status = 201, body = Pool), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_pool(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreatePool>,
) -> ApiResult<(StatusCode, Json<Pool>)> {
    Ok((
        StatusCode::CREATED,
        Json(res::create_pool(&store, &p, &meta, input, config.scheduler.allow_local_pools).await?),
    ))
}

#[utoipa::path(get, path = "/pools/{id}", tag = "policies", params(("id" = String, Path)), responses((status = 200, body = Pool), (status = 404, body = Problem)))]
async fn get_pool(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Pool>> {
    Ok(Json(res::get_pool(&store, &p, &id).await?))
}

/// The tenant's resource profiles.
#[utoipa::path(get, path = "/profiles", tag = "policies", responses((status = 200, body = Vec<Profile>), (status = 401, body = Problem)))]
async fn list_profiles(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<Profile>>> {
    Ok(Json(res::list_profiles(&store, &p).await?))
}

/// Create a profile: a fixed milli-GPU amount per job, or dynamic within [min, max].
#[utoipa::path(post, path = "/profiles", tag = "policies", request_body = CreateProfile, responses((status = 201, body = Profile), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_profile(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateProfile>,
) -> ApiResult<(StatusCode, Json<Profile>)> {
    Ok((
        StatusCode::CREATED,
        Json(res::create_profile(&store, &p, &meta, input).await?),
    ))
}

#[utoipa::path(get, path = "/profiles/{id}", tag = "policies", params(("id" = String, Path)), responses((status = 200, body = Profile), (status = 404, body = Problem)))]
async fn get_profile(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Profile>> {
    Ok(Json(res::get_profile(&store, &p, &id).await?))
}

/// The tenant's group policies.
#[utoipa::path(get, path = "/policies", tag = "policies", responses((status = 200, body = Vec<Policy>), (status = 401, body = Problem)))]
async fn list_policies(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<Policy>>> {
    Ok(Json(res::list_policies(&store, &p).await?))
}

/// Create or replace a group's policy (one per group): reservation, limit, over-quota weight.
#[utoipa::path(post, path = "/policies", tag = "policies", request_body = SetPolicy, responses((status = 200, body = Policy), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn set_policy(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<SetPolicy>,
) -> ApiResult<(StatusCode, Json<Policy>)> {
    Ok((
        StatusCode::OK,
        Json(res::set_policy(&store, &p, &meta, input).await?),
    ))
}

#[utoipa::path(get, path = "/policies/{id}", tag = "policies", params(("id" = String, Path)), responses((status = 200, body = Policy), (status = 404, body = Problem)))]
async fn get_policy(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Policy>> {
    Ok(Json(res::get_policy(&store, &p, &id).await?))
}

/// The tenant's queues.
#[utoipa::path(get, path = "/queues", tag = "policies", responses((status = 200, body = Vec<Queue>), (status = 401, body = Problem)))]
async fn list_queues(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<Queue>>> {
    Ok(Json(res::list_queues(&store, &p).await?))
}

/// Create a queue: a policy, a profile and an ordered list of pools (later ones are spillover).
#[utoipa::path(post, path = "/queues", tag = "policies", request_body = CreateQueue, responses((status = 201, body = Queue), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_queue(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateQueue>,
) -> ApiResult<(StatusCode, Json<Queue>)> {
    Ok((
        StatusCode::CREATED,
        Json(res::create_queue(&store, &p, &meta, input).await?),
    ))
}

#[utoipa::path(get, path = "/queues/{id}", tag = "policies", params(("id" = String, Path)), responses((status = 200, body = Queue), (status = 404, body = Problem)))]
async fn get_queue(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Queue>> {
    Ok(Json(res::get_queue(&store, &p, &id).await?))
}

/// Jobs, newest first: members see their own, tenant admins every job of the tenant.
#[utoipa::path(get, path = "/jobs", tag = "jobs", params(JobFilter), responses((status = 200, body = Page<Job>), (status = 401, body = Problem), (status = 422, body = Problem)))]
async fn list_jobs(
    State(store): State<Store>,
    Caller(p, _): Caller,
    ApiQuery(f): ApiQuery<JobFilter>,
) -> ApiResult<Json<Page<Job>>> {
    Ok(Json(jobs::list_jobs(&store, &p, &f).await?))
}

/// Submit a job to a queue of one of your groups. It starts `queued`; `wait_reason` says why
/// it waits, in plain words, until the scheduler admits it.
#[utoipa::path(post, path = "/jobs", tag = "jobs", request_body = SubmitJob, params(("Idempotency-Key" = Option<String>, Header, description = "Retries with the same key and body return the job the first request created (`Idempotent-Replayed: true`) instead of a new one; another body with the key is 422. Kept 24 h.")), responses((status = 201, body = Job), (status = 401, body = Problem), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn submit_job(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    headers: HeaderMap,
    ApiJson(input): ApiJson<SubmitJob>,
) -> ApiResult<Response> {
    let key = idem_key(&headers, &input)?;
    let done = jobs::submit(&store, &p, &meta, input, (&*config).into(), key.as_ref()).await?;
    Ok(created(done.replayed, Json(done.value)))
}

/// The request's `Idempotency-Key`, checked, with the digest of its body.
fn idem_key(headers: &HeaderMap, body: &impl serde::Serialize) -> ApiResult<Option<IdemKey>> {
    match headers.get(idempotency::HEADER) {
        None => Ok(None),
        Some(v) => {
            let v = v.to_str().unwrap_or("\u{0}");
            Ok(Some(IdemKey::new(v, body)?))
        }
    }
}

/// 201 with the body; a replayed answer says so in `Idempotent-Replayed: true`.
fn created(replayed: bool, body: impl IntoResponse) -> Response {
    let mut resp = (StatusCode::CREATED, body).into_response();
    if replayed {
        resp.headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    resp
}

/// Submit up to 1000 jobs in one request (a job array), to one queue or several: all are
/// stored in one transaction, or none, and every field error names its job
/// (`jobs[3].gpu_milli`).
#[utoipa::path(post, path = "/jobs/batch", tag = "jobs", request_body = SubmitJobs, params(("Idempotency-Key" = Option<String>, Header, description = "Retries with the same key and body return the jobs the first request created instead of new ones; another body with the key is 422. Kept 24 h.")), responses((status = 201, body = SubmittedJobs), (status = 401, body = Problem), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn submit_jobs(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    headers: HeaderMap,
    ApiJson(input): ApiJson<SubmitJobs>,
) -> ApiResult<Response> {
    let key = idem_key(&headers, &input)?;
    let done =
        jobs::submit_batch(&store, &p, &meta, input, (&*config).into(), key.as_ref()).await?;
    Ok(created(
        done.replayed,
        Json(SubmittedJobs { jobs: done.value }),
    ))
}

/// One job with its full state history.
#[utoipa::path(get, path = "/jobs/{id}", tag = "jobs", params(("id" = String, Path)), responses((status = 200, body = JobDetail), (status = 404, body = Problem)))]
async fn get_job(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<JobDetail>> {
    Ok(Json(jobs::job_detail(&store, &p, &id).await?))
}

/// Abort a job: a waiting one ends at once; a running one runs its abort callback, is
/// stopped, and ends `aborted`.
#[utoipa::path(post, path = "/jobs/{id}/abort", tag = "jobs", params(("id" = String, Path)), responses((status = 200, body = Job), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn abort_job(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Job>> {
    let job = jobs::abort(&store, &p, &meta, &id).await?;
    Ok(Json(job))
}

/// Capacity and use: per pool (in quota, over quota, idle, reserved), per group, per queue
/// (running, waiting, average wait), and the recent preemptions that involve the tenant.
#[utoipa::path(get, path = "/scheduling/overview", tag = "policies", responses((status = 200, body = PolicyOverview), (status = 401, body = Problem)))]
async fn overview(
    State(store): State<Store>,
    State(scheduler): State<SchedulerHandle>,
    Caller(p, _): Caller,
) -> ApiResult<Json<PolicyOverview>> {
    Ok(Json(
        super::overview::overview(&store, &scheduler, &p).await?,
    ))
}

/// GPU allocation (in quota, over quota, idle) per pool and per group, queue depth and wait
/// percentiles over the last hour, day or week, averaged into buckets: tenant admins see their
/// pools (shared ones as totals), groups and queues; members their groups and those groups'
/// queues; platform admins also each tenant's use of the shared pools.
#[utoipa::path(get, path = "/scheduling/history", tag = "policies", params(super::history::read::HistoryQuery), responses((status = 200, body = History), (status = 401, body = Problem), (status = 422, body = Problem)))]
async fn history(
    State(store): State<Store>,
    Caller(p, _): Caller,
    ApiQuery(q): ApiQuery<super::history::read::HistoryQuery>,
) -> ApiResult<Json<History>> {
    let window = HistoryWindow::parse(q.window.as_deref())?;
    Ok(Json(
        super::history::read::history(&store, &p, window, store.now()).await?,
    ))
}
