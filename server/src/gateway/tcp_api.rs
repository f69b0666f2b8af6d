//! REST handlers of raw TCP routes (`/api/v1/tcp-routes`).

use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::model::*;

use super::tcp_routes;
use crate::config::Config;
use crate::http::error::{ApiResult, Problem};
use crate::http::extract::{ApiJson, ApiQuery};
use crate::http::Caller;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
    Arc<Config>: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list_tcp_routes, create_tcp_route))
        .routes(routes!(get_tcp_route, update_tcp_route, delete_tcp_route))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TcpRouteParams {
    /// Only the TCP routes of this gateway.
    gateway_id: Option<String>,
}

/// The organization's raw TCP routes: a port on a gateway, the endpoint it forwards to and
/// the networks that may connect.
#[utoipa::path(get, path = "/tcp-routes", tag = "gateway", params(TcpRouteParams), responses((status = 200, body = Vec<TcpRoute>)))]
async fn list_tcp_routes(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, _): Caller,
    ApiQuery(q): ApiQuery<TcpRouteParams>,
) -> ApiResult<Json<Vec<TcpRoute>>> {
    Ok(Json(
        tcp_routes::list(&store, &config.gateway, &p, q.gateway_id.as_deref()).await?,
    ))
}

/// Open a TCP port for an endpoint on a gateway (tenant admins): the port is given from the
/// server's `gateway_tcp_ports`; only `allowed_sources` may connect.
#[utoipa::path(post, path = "/tcp-routes", tag = "gateway", request_body = CreateTcpRoute, responses((status = 201, body = TcpRoute), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_tcp_route(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateTcpRoute>,
) -> ApiResult<(StatusCode, Json<TcpRoute>)> {
    let r = tcp_routes::create(&store, &config.gateway, &p, &meta, input).await?;
    Ok((StatusCode::CREATED, Json(r)))
}

#[utoipa::path(get, path = "/tcp-routes/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 200, body = TcpRoute), (status = 404, body = Problem)))]
async fn get_tcp_route(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<TcpRoute>> {
    Ok(Json(
        tcp_routes::get(&store, &config.gateway, &p, &id).await?,
    ))
}

/// Switch a TCP route's endpoint or networks (tenant admins): new connections follow at
/// once, open ones are left alone.
#[utoipa::path(patch, path = "/tcp-routes/{id}", tag = "gateway", params(("id" = String, Path)), request_body = UpdateTcpRoute, responses((status = 200, body = TcpRoute), (status = 403, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_tcp_route(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<UpdateTcpRoute>,
) -> ApiResult<Json<TcpRoute>> {
    Ok(Json(
        tcp_routes::update(&store, &config.gateway, &p, &meta, &id, input).await?,
    ))
}

/// Close a TCP route's port (tenant admins); open connections finish.
#[utoipa::path(delete, path = "/tcp-routes/{id}", tag = "gateway", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn delete_tcp_route(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    tcp_routes::delete(&store, &config.gateway, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
