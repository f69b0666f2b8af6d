//! REST handlers for identity: auth, me, users, groups, members, projects, tokens.

use std::sync::{Arc, Mutex};

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::Extension;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::model::*;

use super::directory::{self as dir, ListParams};
use super::tokens;
use crate::http::error::{ApiResult, Problem};
use crate::http::extract::{ApiJson, ApiQuery};
use crate::http::Caller;
use crate::identity::throttle::Throttle;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
    Arc<Mutex<Throttle>>: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(logout))
        .routes(routes!(me))
        .routes(routes!(list_users, create_user))
        .routes(routes!(get_user, update_user, delete_user))
        .routes(routes!(list_groups, create_group))
        .routes(routes!(get_group, update_group, delete_group))
        .routes(routes!(list_members, add_member))
        .routes(routes!(remove_member))
        .routes(routes!(list_projects, create_project))
        .routes(routes!(get_project, update_project, delete_project))
        .routes(routes!(list_tokens, create_token))
        .routes(routes!(revoke_token))
}

/// Exchange a local username and password for an API token.
#[utoipa::path(post, path = "/auth/login", tag = "auth", request_body = LoginRequest,
    responses((status = 200, body = LoginResponse), (status = 401, body = Problem), (status = 429, body = Problem), (status = 422, body = Problem)))]
async fn login(
    State(store): State<Store>,
    State(throttle): State<Arc<Mutex<Throttle>>>,
    Extension(meta): Extension<RequestMeta>,
    ApiJson(req): ApiJson<LoginRequest>,
) -> ApiResult<Json<LoginResponse>> {
    let me = super::login::password_login(
        &store,
        &throttle,
        &meta,
        &req.tenant,
        &req.username,
        &req.password,
    )
    .await?;
    let name = req.token_name.unwrap_or_else(|| "login".into());
    let t = tokens::issue_token(
        &store,
        &me,
        &meta,
        &name,
        req.expires_in_days,
        1,
        "auth.login",
    )
    .await?;
    Ok(Json(LoginResponse {
        token: t.token,
        token_id: t.info.id,
        expires_at: t.info.expires_at,
        me,
    }))
}

/// Revoke the token this request was made with (or end the browser session).
#[utoipa::path(post, path = "/auth/logout", tag = "auth", responses((status = 204), (status = 401, body = Problem)))]
async fn logout(State(store): State<Store>, Caller(p, meta): Caller) -> ApiResult<StatusCode> {
    match &p.auth {
        Auth::Token { token_id } => tokens::revoke_token(&store, &p, &meta, token_id).await?,
        Auth::Session { .. } => tokens::end_session(&store, &p, &meta).await?,
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The caller.
#[utoipa::path(get, path = "/me", tag = "auth", responses((status = 200, body = Me), (status = 401, body = Problem)))]
async fn me(Caller(p, _): Caller) -> Json<Me> {
    Json(p.me)
}

#[utoipa::path(get, path = "/users", tag = "users", params(ListParams), responses((status = 200, body = Page<User>), (status = 401, body = Problem)))]
async fn list_users(
    State(store): State<Store>,
    Caller(p, _): Caller,
    ApiQuery(q): ApiQuery<ListParams>,
) -> ApiResult<Json<Page<User>>> {
    Ok(Json(dir::list_users(&store, &p, &q).await?))
}

#[utoipa::path(post, path = "/users", tag = "users", request_body = CreateUser, responses((status = 201, body = User), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn create_user(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateUser>,
) -> ApiResult<(StatusCode, Json<User>)> {
    Ok((
        StatusCode::CREATED,
        Json(dir::create_user(&store, &p, &meta, input).await?),
    ))
}

#[utoipa::path(get, path = "/users/{id}", tag = "users", params(("id" = String, Path)), responses((status = 200, body = User), (status = 404, body = Problem)))]
async fn get_user(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<User>> {
    Ok(Json(dir::get_user(&store, &p, &id).await?))
}

#[utoipa::path(patch, path = "/users/{id}", tag = "users", params(("id" = String, Path)), request_body = UpdateUser, responses((status = 200, body = User), (status = 403, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_user(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<UpdateUser>,
) -> ApiResult<Json<User>> {
    Ok(Json(dir::update_user(&store, &p, &meta, &id, input).await?))
}

#[utoipa::path(delete, path = "/users/{id}", tag = "users", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_user(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    dir::delete_user(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/groups", tag = "groups", params(ListParams), responses((status = 200, body = Page<Group>)))]
async fn list_groups(
    State(store): State<Store>,
    Caller(p, _): Caller,
    ApiQuery(q): ApiQuery<ListParams>,
) -> ApiResult<Json<Page<Group>>> {
    Ok(Json(dir::list_groups(&store, &p, &q).await?))
}

#[utoipa::path(post, path = "/groups", tag = "groups", request_body = CreateGroup, responses((status = 201, body = Group), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn create_group(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateGroup>,
) -> ApiResult<(StatusCode, Json<Group>)> {
    Ok((
        StatusCode::CREATED,
        Json(dir::create_group(&store, &p, &meta, input).await?),
    ))
}

#[utoipa::path(get, path = "/groups/{id}", tag = "groups", params(("id" = String, Path)), responses((status = 200, body = Group), (status = 404, body = Problem)))]
async fn get_group(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Group>> {
    Ok(Json(dir::get_group(&store, &p, &id).await?))
}

#[utoipa::path(patch, path = "/groups/{id}", tag = "groups", params(("id" = String, Path)), request_body = UpdateGroup, responses((status = 200, body = Group), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_group(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<UpdateGroup>,
) -> ApiResult<Json<Group>> {
    Ok(Json(
        dir::update_group(&store, &p, &meta, &id, input).await?,
    ))
}

#[utoipa::path(delete, path = "/groups/{id}", tag = "groups", params(("id" = String, Path)), responses((status = 204), (status = 404, body = Problem)))]
async fn delete_group(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    dir::delete_group(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/groups/{id}/members", tag = "groups", params(("id" = String, Path)), responses((status = 200, body = Vec<Member>), (status = 404, body = Problem)))]
async fn list_members(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<Member>>> {
    Ok(Json(dir::list_members(&store, &p, &id).await?))
}

/// Add a user to a group: they get everything the group may use, at once.
#[utoipa::path(post, path = "/groups/{id}/members", tag = "groups", params(("id" = String, Path)), request_body = AddMember, responses((status = 201, body = Member), (status = 404, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn add_member(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<AddMember>,
) -> ApiResult<(StatusCode, Json<Member>)> {
    Ok((
        StatusCode::CREATED,
        Json(dir::add_member(&store, &p, &meta, &id, &input.user_id).await?),
    ))
}

/// Remove a user from a group: everything that came from the group ends on the next request.
#[utoipa::path(delete, path = "/groups/{id}/members/{user_id}", tag = "groups", params(("id" = String, Path), ("user_id" = String, Path)), responses((status = 204), (status = 404, body = Problem)))]
async fn remove_member(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path((id, user_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    dir::remove_member(&store, &p, &meta, &id, &user_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/projects", tag = "projects", params(ListParams), responses((status = 200, body = Page<Project>)))]
async fn list_projects(
    State(store): State<Store>,
    Caller(p, _): Caller,
    ApiQuery(q): ApiQuery<ListParams>,
) -> ApiResult<Json<Page<Project>>> {
    Ok(Json(dir::list_projects(&store, &p, &q).await?))
}

#[utoipa::path(post, path = "/projects", tag = "projects", request_body = CreateProject, responses((status = 201, body = Project), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn create_project(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateProject>,
) -> ApiResult<(StatusCode, Json<Project>)> {
    Ok((
        StatusCode::CREATED,
        Json(dir::create_project(&store, &p, &meta, input).await?),
    ))
}

#[utoipa::path(get, path = "/projects/{id}", tag = "projects", params(("id" = String, Path)), responses((status = 200, body = Project), (status = 404, body = Problem)))]
async fn get_project(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Project>> {
    Ok(Json(dir::get_project(&store, &p, &id).await?))
}

#[utoipa::path(patch, path = "/projects/{id}", tag = "projects", params(("id" = String, Path)), request_body = UpdateProject, responses((status = 200, body = Project), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_project(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<UpdateProject>,
) -> ApiResult<Json<Project>> {
    Ok(Json(
        dir::update_project(&store, &p, &meta, &id, input).await?,
    ))
}

#[utoipa::path(delete, path = "/projects/{id}", tag = "projects", params(("id" = String, Path)), responses((status = 204), (status = 404, body = Problem), (status = 409, body = Problem)))]
async fn delete_project(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    dir::delete_project(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's API tokens (tenant admins: every token of the tenant). Secrets are never listed.
#[utoipa::path(get, path = "/tokens", tag = "tokens", responses((status = 200, body = Vec<ApiToken>)))]
async fn list_tokens(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<ApiToken>>> {
    Ok(Json(tokens::list_tokens(&store, &p).await?))
}

/// Create an API token; the secret is in this response only.
#[utoipa::path(post, path = "/tokens", tag = "tokens", request_body = CreateToken, responses((status = 201, body = NewToken), (status = 422, body = Problem)))]
async fn create_token(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateToken>,
) -> ApiResult<(StatusCode, Json<NewToken>)> {
    Ok((
        StatusCode::CREATED,
        Json(tokens::create_token(&store, &p, &meta, input).await?),
    ))
}

/// Revoke a token; it stops working on the next request.
#[utoipa::path(delete, path = "/tokens/{id}", tag = "tokens", params(("id" = String, Path)), responses((status = 204), (status = 404, body = Problem)))]
async fn revoke_token(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    tokens::revoke_token(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
