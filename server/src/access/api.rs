//! REST handlers: access rules (tenant admins) and "what can this user do".

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::model::*;

use crate::http::error::{ApiResult, Problem};
use crate::http::extract::ApiJson;
use crate::http::Caller;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list_rules, create_rule))
        .routes(routes!(delete_rule))
        .routes(routes!(user_access))
}

/// The tenant's access rules: group → permission on a kind of resource (one, a project
/// subtree, or all).
#[utoipa::path(get, path = "/access-rules", tag = "access", responses((status = 200, body = Vec<AccessRule>), (status = 403, body = Problem)))]
async fn list_rules(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<AccessRule>>> {
    Ok(Json(super::list_rules(&store, &p).await?))
}

/// Grant a group a permission; takes effect on the members' next request.
#[utoipa::path(post, path = "/access-rules", tag = "access", request_body = CreateAccessRule, responses((status = 201, body = AccessRule), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn create_rule(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateAccessRule>,
) -> ApiResult<(StatusCode, Json<AccessRule>)> {
    let r = super::create_rule(&store, &p, &meta, input).await?;
    Ok((StatusCode::CREATED, Json(r)))
}

/// Remove a rule; its members lose what it granted on their next request.
#[utoipa::path(delete, path = "/access-rules/{id}", tag = "access", params(("id" = String, Path)), responses((status = 204), (status = 404, body = Problem)))]
async fn delete_rule(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    super::delete_rule(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What can this user do: their groups and every queue, model, dataset and project they
/// reach, with the permission and where it comes from (tenant admins).
#[utoipa::path(get, path = "/users/{id}/access", tag = "access", params(("id" = String, Path)), responses((status = 200, body = UserAccess), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn user_access(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<UserAccess>> {
    Ok(Json(super::user_access(&store, &p, &id).await?))
}
