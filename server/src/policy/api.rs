//! REST handlers that change and delete pools, profiles, queues and policies (their reads and
//! creates are in `scheduler::api`). Each change is one transaction with its audit entry;
//! a delete of something still in use answers 409 saying what uses it.

use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::model::*;

use crate::config::Config;
use crate::http::error::{ApiResult, Problem};
use crate::http::extract::ApiJson;
use crate::http::Caller;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
    Arc<Config>: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(update_pool, delete_pool))
        .routes(routes!(update_profile, delete_profile))
        .routes(routes!(update_queue, delete_queue))
        .routes(routes!(delete_policy))
}

/// Change a pool: name, executor, nodes, cost (shared pools: platform admins only). 409 when
/// it would strand running jobs (a node that runs jobs removed, renamed or moved, or fewer
/// GPUs than they use) or leave a shared pool's grants above its capacity.
#[utoipa::path(patch, path = "/pools/{id}", tag = "policies", params(("id" = String, Path)), request_body = UpdatePool, responses((status = 200, body = Pool), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_pool(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<UpdatePool>,
) -> ApiResult<Json<Pool>> {
    let allowed = config.scheduler.allow_local_pools;
    Ok(Json(
        super::update_pool(&store, &p, &meta, &id, input, allowed).await?,
    ))
}

/// Delete a pool (shared pools: platform admins only). 409 while a queue lists it or a job
/// runs on it. Its per-pool quotas and grants go with it.
#[utoipa::path(delete, path = "/pools/{id}", tag = "policies", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_pool(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    super::delete_pool(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Change a profile. Jobs already submitted keep what they asked for.
#[utoipa::path(patch, path = "/profiles/{id}", tag = "policies", params(("id" = String, Path)), request_body = UpdateProfile, responses((status = 200, body = Profile), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_profile(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<UpdateProfile>,
) -> ApiResult<Json<Profile>> {
    Ok(Json(
        super::update_profile(&store, &p, &meta, &id, input).await?,
    ))
}

/// Delete a profile. 409 while a queue gives it.
#[utoipa::path(delete, path = "/profiles/{id}", tag = "policies", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_profile(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    super::delete_profile(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Change a queue: name, profile, pools (in order; later ones are spillover), over-quota,
/// priority classes, minimum runtime. Its group policy stays.
#[utoipa::path(patch, path = "/queues/{id}", tag = "policies", params(("id" = String, Path)), request_body = UpdateQueue, responses((status = 200, body = Queue), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn update_queue(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<UpdateQueue>,
) -> ApiResult<Json<Queue>> {
    Ok(Json(
        super::update_queue(&store, &p, &meta, &id, input).await?,
    ))
}

/// Delete a queue. 409 while it has live jobs (queued, admitted, starting, running,
/// preempting), or finished ones whose history names it.
#[utoipa::path(delete, path = "/queues/{id}", tag = "policies", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_queue(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    super::delete_queue(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete a group's policy (change one with `POST /policies`). 409 while a queue is under it.
#[utoipa::path(delete, path = "/policies/{id}", tag = "policies", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_policy(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    super::delete_policy(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
