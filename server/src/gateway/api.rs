//! REST handlers of the gateway: endpoints, their targets and traffic over time, gateways,
//! routes and gateway tokens (`/api/v1/endpoints`, `/gateways`, `/routes`, `/gateway-tokens`).

use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::model::*;

use super::{endpoints, instances, routes as gw_routes, sampler, tokens};
use crate::config::Config;
use crate::gateway::Gateways;
use crate::http::error::{ApiResult, Problem};
use crate::http::extract::{ApiJson, ApiQuery};
use crate::http::Caller;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
    Arc<Config>: FromRef<S>,
    Arc<Gateways>: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list_endpoints, create_endpoint))
        .routes(routes!(get_endpoint, delete_endpoint))
        .routes(routes!(endpoint_metrics))
        .routes(routes!(add_target))
        .routes(routes!(remove_target))
        .routes(routes!(list_gateways, create_gateway))
        .routes(routes!(get_gateway, delete_gateway))
        .routes(routes!(gateway_certificate))
        .routes(routes!(issue_token))
        .routes(routes!(list_routes, create_route))
        .routes(routes!(get_route, update_route, delete_route))
        .routes(routes!(list_tokens))
        .routes(routes!(revoke_token))
}

// ---- endpoints ----------------------------------------------------------------------------

/// Endpoints the caller may see, each with its targets and the URLs its routes publish.
#[utoipa::path(get, path = "/endpoints", tag = "gateway", responses((status = 200, body = Vec<Endpoint>)))]
async fn list_endpoints(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<Endpoint>>> {
    Ok(Json(
        endpoints::list_endpoints(&store, &config.gateway, &p).await?,
    ))
}

/// Create an endpoint in a project you may `use`; you own it. Only tenant admins may make one
/// public.
#[utoipa::path(post, path = "/endpoints", tag = "gateway", request_body = CreateEndpoint, responses((status = 201, body = Endpoint), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_endpoint(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateEndpoint>,
) -> ApiResult<(StatusCode, Json<Endpoint>)> {
    let e = endpoints::create_endpoint(&store, &config.gateway, &p, &meta, input).await?;
    Ok((StatusCode::CREATED, Json(e)))
}

#[utoipa::path(get, path = "/endpoints/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 200, body = Endpoint), (status = 404, body = Problem)))]
async fn get_endpoint(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Endpoint>> {
    Ok(Json(
        endpoints::get_endpoint(&store, &config.gateway, &p, &id).await?,
    ))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TrafficParams {
    /// `15m` (one point per 10-second sample) or `1h` (the default; one point per minute).
    #[param(pattern = "^(15m|1h)$")]
    window: Option<String>,
}

/// The endpoint's traffic over time, from the gateway's samples of its counters every 10 s
/// (kept in memory for an hour): requests by status class, error rate (the share answered
/// 5xx), time to first byte p50/p95/p99 (estimated from the histogram's buckets), bytes in and
/// out, tokens, in flight, and per instance requests, failures, in flight, health and
/// distinct sessions. Whoever may see the endpoint may read it.
#[utoipa::path(get, path = "/endpoints/{id}/metrics", tag = "gateway", params(("id" = String, Path), TrafficParams), responses((status = 200, body = EndpointTraffic), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn endpoint_metrics(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    State(gateways): State<Arc<Gateways>>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<TrafficParams>,
) -> ApiResult<Json<EndpointTraffic>> {
    let window = TrafficWindow::parse(q.window.as_deref())?;
    Ok(Json(
        sampler::endpoint_traffic(&store, &config.gateway, &gateways, &p, &id, window).await?,
    ))
}

/// Delete an endpoint you may `manage`, with its targets and the routes leading to it.
#[utoipa::path(delete, path = "/endpoints/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn delete_endpoint(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    endpoints::delete_endpoint(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Register an upstream instance (`host:port`) of an endpoint you may `manage`.
#[utoipa::path(post, path = "/endpoints/{id}/targets", tag = "gateway", params(("id" = String, Path)), request_body = CreateTarget, responses((status = 201, body = EndpointTarget), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn add_target(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<CreateTarget>,
) -> ApiResult<(StatusCode, Json<EndpointTarget>)> {
    let t = endpoints::add_target(&store, &p, &meta, &id, input).await?;
    Ok((StatusCode::CREATED, Json(t)))
}

/// Remove an upstream instance of an endpoint you may `manage`.
#[utoipa::path(delete, path = "/endpoints/{id}/targets/{target_id}", tag = "gateway", params(("id" = String, Path), ("target_id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn remove_target(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path((id, target_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    endpoints::remove_target(&store, &p, &meta, &id, &target_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---- gateways -----------------------------------------------------------------------------

/// The organization's gateways (prod, dev, ...), each with its listener's URL.
#[utoipa::path(get, path = "/gateways", tag = "gateway", responses((status = 200, body = Vec<Gateway>)))]
async fn list_gateways(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<Gateway>>> {
    Ok(Json(
        instances::list_gateways(&store, &config.gateway, &p).await?,
    ))
}

/// Create a gateway (tenant admins): it gets the lowest free port of the configured range.
#[utoipa::path(post, path = "/gateways", tag = "gateway", request_body = CreateGateway, responses((status = 201, body = Gateway), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_gateway(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateGateway>,
) -> ApiResult<(StatusCode, Json<Gateway>)> {
    let g = instances::create_gateway(&store, &config.gateway, &p, &meta, input).await?;
    Ok((StatusCode::CREATED, Json(g)))
}

#[utoipa::path(get, path = "/gateways/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 200, body = Gateway), (status = 404, body = Problem)))]
async fn get_gateway(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Gateway>> {
    Ok(Json(
        instances::get_gateway(&store, &config.gateway, &p, &id).await?,
    ))
}

/// The certificate a gateway's listener presents (PEM), to trust a self-signed one; 404 when
/// it listens without TLS.
#[utoipa::path(get, path = "/gateways/{id}/certificate", tag = "gateway", params(("id" = String, Path)), responses((status = 200, content_type = "application/x-pem-file", body = String), (status = 404, body = Problem)))]
async fn gateway_certificate(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    State(gateways): State<Arc<Gateways>>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    instances::get_gateway(&store, &config.gateway, &p, &id).await?;
    match gateways.certificate(&id).await {
        Some(pem) => Ok((
            [(axum::http::header::CONTENT_TYPE, "application/x-pem-file")],
            pem,
        )
            .into_response()),
        None => Err(crate::http::error::AppError::NotFound.into()),
    }
}

/// Delete a gateway (tenant admins), with its routes and tokens.
#[utoipa::path(delete, path = "/gateways/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn delete_gateway(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    instances::delete_gateway(&store, &config.gateway, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Issue yourself a token for this gateway: without `endpoint_ids` it carries your rights at
/// the time of each request, with them only those endpoints. The secret is in this answer
/// only.
#[utoipa::path(post, path = "/gateways/{id}/tokens", tag = "gateway", params(("id" = String, Path)), request_body = CreateGatewayToken, responses((status = 201, body = IssuedGatewayToken), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn issue_token(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<CreateGatewayToken>,
) -> ApiResult<(StatusCode, Json<IssuedGatewayToken>)> {
    let t = tokens::issue_token(&store, &p, &meta, &id, input).await?;
    Ok((StatusCode::CREATED, Json(t)))
}

// ---- routes -------------------------------------------------------------------------------

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RouteParams {
    /// Only the routes of this gateway.
    gateway_id: Option<String>,
}

/// The organization's routes: host and path prefix on a gateway, and the endpoint they lead to.
#[utoipa::path(get, path = "/routes", tag = "gateway", params(RouteParams), responses((status = 200, body = Vec<GatewayRoute>)))]
async fn list_routes(
    State(store): State<Store>,
    Caller(p, _): Caller,
    ApiQuery(q): ApiQuery<RouteParams>,
) -> ApiResult<Json<Vec<GatewayRoute>>> {
    Ok(Json(
        gw_routes::list_routes(&store, &p, q.gateway_id.as_deref()).await?,
    ))
}

/// Publish an endpoint on a gateway under a host and/or path prefix (tenant admins).
#[utoipa::path(post, path = "/routes", tag = "gateway", request_body = CreateGatewayRoute, responses((status = 201, body = GatewayRoute), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_route(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateGatewayRoute>,
) -> ApiResult<(StatusCode, Json<GatewayRoute>)> {
    let r = gw_routes::create_route(&store, &p, &meta, input).await?;
    Ok((StatusCode::CREATED, Json(r)))
}

#[utoipa::path(get, path = "/routes/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 200, body = GatewayRoute), (status = 404, body = Problem)))]
async fn get_route(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<GatewayRoute>> {
    Ok(Json(gw_routes::get_route(&store, &p, &id).await?))
}

/// Point a route at another endpoint (tenant admins); its URL stays the same.
#[utoipa::path(patch, path = "/routes/{id}", tag = "gateway", params(("id" = String, Path)), request_body = UpdateGatewayRoute, responses((status = 200, body = GatewayRoute), (status = 403, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_route(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<UpdateGatewayRoute>,
) -> ApiResult<Json<GatewayRoute>> {
    Ok(Json(
        gw_routes::update_route(&store, &p, &meta, &id, input).await?,
    ))
}

/// Remove a route (tenant admins); the endpoint stays.
#[utoipa::path(delete, path = "/routes/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn delete_route(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    gw_routes::delete_route(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---- gateway tokens -----------------------------------------------------------------------

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TokenParams {
    /// Tenant admins: every token of the organization, not only your own.
    all: Option<bool>,
}

/// Your gateway tokens (never their secrets).
#[utoipa::path(get, path = "/gateway-tokens", tag = "gateway", params(TokenParams), responses((status = 200, body = Vec<GatewayToken>), (status = 403, body = Problem)))]
async fn list_tokens(
    State(store): State<Store>,
    Caller(p, _): Caller,
    ApiQuery(q): ApiQuery<TokenParams>,
) -> ApiResult<Json<Vec<GatewayToken>>> {
    Ok(Json(
        tokens::list_tokens(&store, &p, q.all.unwrap_or(false)).await?,
    ))
}

/// Revoke a gateway token (yours, or any of the organization's for tenant admins).
#[utoipa::path(delete, path = "/gateway-tokens/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 204), (status = 404, body = Problem)))]
async fn revoke_token(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    tokens::revoke_token(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
