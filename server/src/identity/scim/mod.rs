//! SCIM 2.0 (RFC 7643/7644) so an IdP can push users and groups and deprovision them before
//! they ever sign in: `/scim/v2/Users` and `/scim/v2/Groups` (list with `eq` filters and
//! paging, create, read, replace, patch, delete), `ServiceProviderConfig`, `ResourceTypes` and
//! `Schemas`. Each tenant has its own bearer token (`POST /api/v1/scim/token`, shown once,
//! stored as SHA-256, replaced by the next one, revoked with `DELETE`).
//!
//! Users created here have no password and are marked `provisioned_by = 'scim'`; their first
//! SSO sign-in links to them when the IdP's verified e-mail address equals theirs, in one of the
//! provider's allowed domains (`identity::sso::link`). Memberships added here have source `scim`: sign-in
//! group sync leaves them alone, SCIM removes them. `active: false` disables the user, which
//! ends every session and API token on their next request. Every change is audited with actor
//! `scim`.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use sqlx::Row;

use app::access::Action;
use app::model::{Principal, RequestMeta};

use crate::api::error::ApiResult;
use crate::api::text;
use crate::audit::{self, Actor, Record};
use crate::clock::now_ms;
use crate::identity::directory::slug_ok;
use crate::identity::{require, secret};
use crate::state::AppState;
use crate::store::{flag, new_id, Store, WriteTx};

const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
const LIST_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
const ERROR_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
const PATCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

/// A SCIM error response (`application/scim+json`).
#[derive(Debug)]
pub struct ScimError {
    status: StatusCode,
    scim_type: Option<&'static str>,
    detail: String,
}

impl ScimError {
    fn new(status: StatusCode, scim_type: Option<&'static str>, detail: impl Into<String>) -> Self {
        ScimError {
            status,
            scim_type,
            detail: detail.into(),
        }
    }
    fn bad(scim_type: &'static str, detail: impl Into<String>) -> Self {
        ScimError::new(StatusCode::BAD_REQUEST, Some(scim_type), detail)
    }
    fn not_found() -> Self {
        ScimError::new(StatusCode::NOT_FOUND, None, "Resource not found")
    }
}

/// A unique-key violation is SCIM's 409 `uniqueness`; anything else a database error.
fn unique_or(e: sqlx::Error, what: &str) -> ScimError {
    if crate::store::is_unique_violation(&e) {
        ScimError::new(StatusCode::CONFLICT, Some("uniqueness"), what.to_string())
    } else {
        e.into()
    }
}

impl From<sqlx::Error> for ScimError {
    fn from(e: sqlx::Error) -> Self {
        if crate::store::is_foreign_key_violation(&e) {
            return ScimError::new(
                StatusCode::CONFLICT,
                None,
                "it is still in use by other objects; remove those in Switchyard first",
            );
        }
        tracing::error!(error = %e, "scim: database error");
        ScimError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "Internal error")
    }
}

impl IntoResponse for ScimError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "schemas": [ERROR_SCHEMA],
            "status": self.status.as_u16().to_string(),
            "detail": self.detail,
        });
        if let Some(t) = self.scim_type {
            body["scimType"] = json!(t);
        }
        scim_json(self.status, body)
    }
}

fn scim_json(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/scim+json")],
        body.to_string(),
    )
        .into_response()
}

type ScimResult = Result<Response, ScimError>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/scim/v2/ServiceProviderConfig",
            get(service_provider_config),
        )
        .route("/scim/v2/ResourceTypes", get(resource_types))
        .route("/scim/v2/Schemas", get(schemas))
        .route("/scim/v2/Users", get(list_users).post(create_user))
        .route(
            "/scim/v2/Users/{id}",
            get(get_user)
                .put(replace_user)
                .patch(patch_user)
                .delete(delete_user),
        )
        .route("/scim/v2/Groups", get(list_groups).post(create_group))
        .route(
            "/scim/v2/Groups/{id}",
            get(get_group)
                .put(replace_group)
                .patch(patch_group)
                .delete(delete_group),
        )
}

/// The tenant whose SCIM token this request carries.
async fn tenant(state: &AppState, headers: &HeaderMap) -> Result<String, ScimError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or("");
    let unauthorized = || {
        ScimError::new(
            StatusCode::UNAUTHORIZED,
            None,
            "A valid SCIM bearer token is required",
        )
    };
    if token.is_empty() {
        return Err(unauthorized());
    }
    let t: Option<String> =
        sqlx::query_scalar("SELECT tenant_id FROM scim_tokens WHERE token_hash = $1")
            .bind(secret::digest(token))
            .fetch_optional(&state.store.pool)
            .await?;
    t.ok_or_else(unauthorized)
}

fn actor() -> Actor {
    Actor::system("scim")
}

async fn record(
    tx: &mut WriteTx,
    tenant_id: &str,
    meta: &RequestMeta,
    action: &str,
    kind: &str,
    id: &str,
    summary: Value,
) -> Result<(), sqlx::Error> {
    audit::append(
        tx,
        now_ms(),
        Record {
            tenant_id,
            actor: &actor(),
            action,
            target_kind: kind,
            target_id: id,
            summary,
            meta,
        },
    )
    .await
}

fn meta_of(headers: &HeaderMap) -> RequestMeta {
    RequestMeta {
        source_ip: String::new(),
        request_id: headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
    }
}

/// `2026-12-02T17:04:05Z`
fn rfc3339(ms: i64) -> String {
    app::time::format_ms(ms)
        .replacen(' ', "T", 1)
        .replace(" UTC", "Z")
}

// ---- discovery ----------------------------------------------------------------------------

async fn service_provider_config() -> Response {
    scim_json(
        StatusCode::OK,
        json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
            "patch": {"supported": true},
            "bulk": {"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
            "filter": {"supported": true, "maxResults": 200},
            "changePassword": {"supported": false},
            "sort": {"supported": false},
            "etag": {"supported": false},
            "authenticationSchemes": [{"type": "oauthbearertoken", "name": "Bearer token", "description": "The tenant's SCIM token"}],
        }),
    )
}

async fn resource_types() -> Response {
    scim_json(
        StatusCode::OK,
        json!({
            "schemas": [LIST_SCHEMA], "totalResults": 2, "startIndex": 1, "itemsPerPage": 2,
            "Resources": [
                {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"], "id": "User", "name": "User", "endpoint": "/Users", "schema": USER_SCHEMA},
                {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"], "id": "Group", "name": "Group", "endpoint": "/Groups", "schema": GROUP_SCHEMA},
            ],
        }),
    )
}

async fn schemas() -> Response {
    scim_json(
        StatusCode::OK,
        json!({
            "schemas": [LIST_SCHEMA], "totalResults": 2, "startIndex": 1, "itemsPerPage": 2,
            "Resources": [
                {"id": USER_SCHEMA, "name": "User", "attributes": [
                    {"name": "userName", "type": "string", "required": true, "uniqueness": "server"},
                    {"name": "displayName", "type": "string"}, {"name": "emails", "type": "complex", "multiValued": true},
                    {"name": "active", "type": "boolean"}, {"name": "externalId", "type": "string"}]},
                {"id": GROUP_SCHEMA, "name": "Group", "attributes": [
                    {"name": "displayName", "type": "string", "required": true},
                    {"name": "members", "type": "complex", "multiValued": true}]},
            ],
        }),
    )
}

// ---- filters and paging -------------------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ListQuery {
    filter: Option<String>,
    start_index: Option<i64>,
    count: Option<i64>,
}

/// `attr eq "value"`, the filter IdPs send to find an existing resource.
fn parse_filter(filter: &str, allowed: &[&str]) -> Result<(String, String), ScimError> {
    let f = filter.trim();
    let (attr, rest) = f
        .split_once(char::is_whitespace)
        .ok_or_else(|| ScimError::bad("invalidFilter", "use: attribute eq \"value\""))?;
    let (op, value) = rest
        .trim()
        .split_once(char::is_whitespace)
        .ok_or_else(|| ScimError::bad("invalidFilter", "use: attribute eq \"value\""))?;
    if !op.eq_ignore_ascii_case("eq") {
        return Err(ScimError::bad(
            "invalidFilter",
            "only the eq operator is supported",
        ));
    }
    let attr = allowed
        .iter()
        .find(|a| a.eq_ignore_ascii_case(attr))
        .ok_or_else(|| {
            ScimError::bad(
                "invalidFilter",
                format!("filter on one of: {}", allowed.join(", ")),
            )
        })?;
    let v = value.trim();
    let v = v
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .ok_or_else(|| ScimError::bad("invalidFilter", "the value must be a quoted string"))?;
    Ok((attr.to_string(), v.replace("\\\"", "\"")))
}

fn page(q: &ListQuery) -> (i64, i64) {
    let start = q.start_index.unwrap_or(1).max(1);
    let count = q.count.unwrap_or(100).clamp(0, 200);
    (start, count)
}

fn list_response(total: usize, start: i64, items: Vec<Value>) -> Response {
    scim_json(
        StatusCode::OK,
        json!({
            "schemas": [LIST_SCHEMA],
            "totalResults": total,
            "startIndex": start,
            "itemsPerPage": items.len(),
            "Resources": items,
        }),
    )
}

// ---- users --------------------------------------------------------------------------------

struct ScimUser {
    id: String,
    username: String,
    display_name: String,
    email: Option<String>,
    external_id: Option<String>,
    active: bool,
    created_at: i64,
}

/// The users SCIM may see and change, as a condition on the `users` row named `u`: those SCIM
/// provisioned or an IdP signed in, never local accounts and never admins (those stay under
/// the tenant's own control; a SCIM token must not disable or delete them).
fn managed(u: &str) -> String {
    format!(
        "{u}.is_tenant_admin = 0 AND {u}.is_platform_admin = 0 AND ({u}.provisioned_by = 'scim' OR EXISTS (SELECT 1 FROM external_identities x WHERE x.user_id = {u}.id))"
    )
}

async fn load_users(
    store: &Store,
    tenant: &str,
    id: Option<&str>,
) -> Result<Vec<ScimUser>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT id, username, display_name, email, external_id, disabled, created_at FROM users
         WHERE tenant_id = $1 AND ($2 = '' OR id = $2) AND {} ORDER BY username",
        managed("users")
    ))
    .bind(tenant)
    .bind(id.unwrap_or(""))
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(ScimUser {
                id: r.try_get("id")?,
                username: r.try_get("username")?,
                display_name: r.try_get("display_name")?,
                email: r.try_get("email")?,
                external_id: r.try_get("external_id")?,
                active: r.try_get::<i64, _>("disabled")? == 0,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}

async fn user_groups(
    store: &Store,
    tenant: &str,
    user_id: &str,
) -> Result<Vec<Value>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT g.id, g.name FROM memberships m JOIN groups g ON g.id = m.group_id WHERE m.tenant_id = $1 AND m.user_id = $2 ORDER BY g.name",
    )
    .bind(tenant)
    .bind(user_id)
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| {
            let id: String = r.try_get("id")?;
            Ok(json!({"value": id, "display": r.try_get::<String, _>("name")?, "$ref": format!("/scim/v2/Groups/{id}")}))
        })
        .collect()
}

async fn user_json(store: &Store, tenant: &str, u: &ScimUser) -> Result<Value, sqlx::Error> {
    let mut v = json!({
        "schemas": [USER_SCHEMA],
        "id": u.id,
        "userName": u.username,
        "displayName": u.display_name,
        "name": {"formatted": u.display_name},
        "active": u.active,
        "groups": user_groups(store, tenant, &u.id).await?,
        "meta": {"resourceType": "User", "created": rfc3339(u.created_at), "location": format!("/scim/v2/Users/{}", u.id)},
    });
    if let Some(e) = &u.email {
        v["emails"] = json!([{"value": e, "primary": true, "type": "work"}]);
    }
    if let Some(x) = &u.external_id {
        v["externalId"] = json!(x);
    }
    Ok(v)
}

async fn list_users(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let mut users = load_users(&state.store, &tenant, None).await?;
    if let Some(f) = &q.filter {
        let (attr, value) = parse_filter(f, &["userName", "externalId", "id"])?;
        users.retain(|u| match attr.as_str() {
            "userName" => u.username.eq_ignore_ascii_case(&value),
            "externalId" => u.external_id.as_deref() == Some(value.as_str()),
            _ => u.id == value,
        });
    }
    let (start, count) = page(&q);
    let total = users.len();
    let mut items = Vec::new();
    for u in users.iter().skip((start - 1) as usize).take(count as usize) {
        items.push(user_json(&state.store, &tenant, u).await?);
    }
    Ok(list_response(total, start, items))
}

async fn get_user(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let u = load_users(&state.store, &tenant, Some(&id))
        .await?
        .pop()
        .ok_or_else(ScimError::not_found)?;
    Ok(scim_json(
        StatusCode::OK,
        user_json(&state.store, &tenant, &u).await?,
    ))
}

/// The attributes of a User body that Switchyard keeps.
struct UserInput {
    username: String,
    display_name: String,
    email: Option<String>,
    external_id: Option<String>,
    active: bool,
}

fn user_input(body: &Value) -> Result<UserInput, ScimError> {
    let raw = body["userName"]
        .as_str()
        .ok_or_else(|| ScimError::bad("invalidValue", "userName is required"))?;
    let username = crate::identity::sso::clean_username(raw)
        .filter(|u| slug_ok(u))
        .ok_or_else(|| {
            ScimError::bad(
                "invalidValue",
                "userName: use letters, digits, '-', '_' or '.' (an email's local part works)",
            )
        })?;
    let display_name = body["displayName"]
        .as_str()
        .or_else(|| body["name"]["formatted"].as_str())
        .map(str::to_string)
        .or_else(|| {
            let given = body["name"]["givenName"].as_str().unwrap_or("");
            let family = body["name"]["familyName"].as_str().unwrap_or("");
            let full = format!("{given} {family}").trim().to_string();
            (!full.is_empty()).then_some(full)
        })
        .unwrap_or_else(|| username.clone());
    let email = body["emails"]
        .as_array()
        .and_then(|es| {
            es.iter()
                .find(|e| e["primary"].as_bool() == Some(true))
                .or_else(|| es.first())
        })
        .and_then(|e| e["value"].as_str())
        .filter(|e| text::clean_text(e) && e.len() <= 254)
        .map(str::to_string);
    Ok(UserInput {
        username,
        // An IdP's names are dropped of control and bidi characters, not refused.
        display_name: text::scrub(&display_name, 100),
        email,
        external_id: body["externalId"].as_str().map(str::to_string),
        active: body["active"].as_bool().unwrap_or(true),
    })
}

async fn create_user(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let input = user_input(&body)?;
    let meta = meta_of(&headers);
    let now = now_ms();
    let id = new_id();
    let mut tx = state.store.begin_write().await?;
    let inserted = sqlx::query(
        "INSERT INTO users (id, tenant_id, username, display_name, email, password_hash, is_tenant_admin, is_platform_admin, disabled, created_at, external_id, provisioned_by)
         VALUES ($1, $2, $3, $4, $5, NULL, 0, 0, $6, $7, $8, 'scim')",
    )
    .bind(&id)
    .bind(&tenant)
    .bind(&input.username)
    .bind(&input.display_name)
    .bind(input.email.clone())
    .bind(flag(!input.active))
    .bind(now)
    .bind(input.external_id.clone())
    .execute(&mut *tx.tx)
    .await;
    if let Err(e) = inserted {
        return Err(unique_or(e, "a user with this userName exists"));
    }
    record(&mut tx, &tenant, &meta, "user.create", "user", &id, json!({"username": input.username, "display_name": input.display_name, "email": input.email, "via": "scim", "active": input.active})).await?;
    tx.commit().await?;
    let u = load_users(&state.store, &tenant, Some(&id))
        .await?
        .pop()
        .ok_or_else(ScimError::not_found)?;
    Ok(scim_json(
        StatusCode::CREATED,
        user_json(&state.store, &tenant, &u).await?,
    ))
}

/// Writes name, email, external id and active; disabling also ends the user's sessions.
async fn write_user(
    store: &Store,
    tenant: &str,
    meta: &RequestMeta,
    id: &str,
    input: &UserInput,
    rename: bool,
) -> Result<(), ScimError> {
    let mut tx = store.begin_write().await?;
    let changed = sqlx::query(&format!(
        "UPDATE users SET display_name = $1, email = $2, external_id = $3, disabled = $4 WHERE tenant_id = $5 AND id = $6 AND {}",
        managed("users")
    ))
    .bind(&input.display_name)
    .bind(input.email.clone())
    .bind(input.external_id.clone())
    .bind(flag(!input.active))
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx.tx)
    .await?
    .rows_affected();
    if changed == 0 {
        return Err(ScimError::not_found());
    }
    if rename {
        let r = sqlx::query("UPDATE users SET username = $1 WHERE tenant_id = $2 AND id = $3")
            .bind(&input.username)
            .bind(tenant)
            .bind(id)
            .execute(&mut *tx.tx)
            .await;
        if let Err(e) = r {
            return Err(unique_or(e, "a user with this userName exists"));
        }
    }
    if !input.active {
        crate::identity::directory::end_access(&mut tx, tenant, id, now_ms(), true).await?;
    }
    record(&mut tx, tenant, meta, "user.update", "user", id, json!({"username": input.username, "display_name": input.display_name, "email": input.email, "active": input.active, "via": "scim"})).await?;
    tx.commit().await?;
    Ok(())
}

async fn replace_user(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let input = user_input(&body)?;
    write_user(&state.store, &tenant, &meta_of(&headers), &id, &input, true).await?;
    get_user(State(state), headers, Path(id)).await
}

async fn patch_user(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let u = load_users(&state.store, &tenant, Some(&id))
        .await?
        .pop()
        .ok_or_else(ScimError::not_found)?;
    let mut input = UserInput {
        username: u.username.clone(),
        display_name: u.display_name.clone(),
        email: u.email.clone(),
        external_id: u.external_id.clone(),
        active: u.active,
    };
    for op in operations(&body)? {
        let (name, path, value) = op;
        if name != "replace" && name != "add" {
            return Err(ScimError::bad(
                "invalidPath",
                format!("{name} is not supported on users"),
            ));
        }
        // `{"op": "replace", "value": {"active": false}}` or `{"path": "active", "value": false}`.
        let mut set = |attr: &str, v: &Value| -> Result<(), ScimError> {
            match attr {
                "active" => {
                    input.active = v
                        .as_bool()
                        .or_else(|| v.as_str().map(|s| s.eq_ignore_ascii_case("true")))
                        .unwrap_or(input.active)
                }
                "displayName" | "name.formatted" => {
                    input.display_name = text::scrub(v.as_str().unwrap_or(""), 100)
                }
                "externalId" => input.external_id = v.as_str().map(str::to_string),
                "emails" => {
                    input.email = v
                        .as_array()
                        .and_then(|a| a.first())
                        .and_then(|e| e["value"].as_str())
                        .filter(|e| text::clean_text(e) && e.len() <= 254)
                        .map(str::to_string)
                }
                "userName" => {
                    input.username = crate::identity::sso::clean_username(v.as_str().unwrap_or(""))
                        .ok_or_else(|| ScimError::bad("invalidValue", "userName is not valid"))?
                }
                _ => {}
            }
            Ok(())
        };
        match path.as_deref() {
            Some(p) => set(p, &value)?,
            None => {
                if let Some(obj) = value.as_object() {
                    for (k, v) in obj {
                        set(k, v)?;
                    }
                }
            }
        }
    }
    let rename = input.username != u.username;
    write_user(
        &state.store,
        &tenant,
        &meta_of(&headers),
        &id,
        &input,
        rename,
    )
    .await?;
    get_user(State(state), headers, Path(id)).await
}

/// The operations of a PatchOp body: (op, path, value).
fn operations(body: &Value) -> Result<Vec<(String, Option<String>, Value)>, ScimError> {
    if !body["schemas"]
        .as_array()
        .is_some_and(|s| s.iter().any(|x| x == PATCH_SCHEMA))
    {
        return Err(ScimError::bad(
            "invalidSyntax",
            "a PatchOp body is required",
        ));
    }
    let ops = body["Operations"]
        .as_array()
        .ok_or_else(|| ScimError::bad("invalidSyntax", "Operations is required"))?;
    Ok(ops
        .iter()
        .map(|o| {
            (
                o["op"].as_str().unwrap_or("").to_lowercase(),
                o["path"].as_str().map(str::to_string),
                o["value"].clone(),
            )
        })
        .collect())
}

async fn delete_user(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let u = load_users(&state.store, &tenant, Some(&id))
        .await?
        .pop()
        .ok_or_else(ScimError::not_found)?;
    let mut tx = state.store.begin_write().await?;
    crate::identity::directory::purge_user(&mut tx, &tenant, &id).await?;
    record(
        &mut tx,
        &tenant,
        &meta_of(&headers),
        "user.delete",
        "user",
        &id,
        json!({"username": u.username, "via": "scim"}),
    )
    .await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- groups -------------------------------------------------------------------------------

async fn group_json(store: &Store, tenant: &str, id: &str) -> Result<Option<Value>, sqlx::Error> {
    let row =
        sqlx::query("SELECT id, name, created_at FROM groups WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(id)
            .fetch_optional(&store.pool)
            .await?;
    let Some(r) = row else { return Ok(None) };
    let members: Vec<Value> = sqlx::query(
        "SELECT u.id, u.username FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.tenant_id = $1 AND m.group_id = $2 ORDER BY u.username",
    )
    .bind(tenant)
    .bind(id)
    .fetch_all(&store.pool)
    .await?
    .iter()
    .map(|m| {
        let uid: String = m.try_get("id")?;
        Ok(json!({"value": uid, "display": m.try_get::<String, _>("username")?, "$ref": format!("/scim/v2/Users/{uid}")}))
    })
    .collect::<Result<_, sqlx::Error>>()?;
    Ok(Some(json!({
        "schemas": [GROUP_SCHEMA],
        "id": r.try_get::<String, _>("id")?,
        "displayName": r.try_get::<String, _>("name")?,
        "members": members,
        "meta": {"resourceType": "Group", "created": rfc3339(r.try_get("created_at")?), "location": format!("/scim/v2/Groups/{id}")},
    })))
}

async fn list_groups(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let rows = sqlx::query("SELECT id, name FROM groups WHERE tenant_id = $1 ORDER BY name")
        .bind(&tenant)
        .fetch_all(&state.store.pool)
        .await?;
    let mut groups: Vec<(String, String)> = rows
        .iter()
        .map(|r| Ok((r.try_get("id")?, r.try_get("name")?)))
        .collect::<Result<_, sqlx::Error>>()?;
    if let Some(f) = &q.filter {
        let (attr, value) = parse_filter(f, &["displayName", "id"])?;
        groups.retain(|(id, name)| {
            if attr == "id" {
                *id == value
            } else {
                name.eq_ignore_ascii_case(&value) || *name == group_slug(&value)
            }
        });
    }
    let (start, count) = page(&q);
    let total = groups.len();
    let mut items = Vec::new();
    for (id, _) in groups
        .iter()
        .skip((start - 1) as usize)
        .take(count as usize)
    {
        if let Some(v) = group_json(&state.store, &tenant, id).await? {
            items.push(v);
        }
    }
    Ok(list_response(total, start, items))
}

async fn get_group(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let v = group_json(&state.store, &tenant, &id)
        .await?
        .ok_or_else(ScimError::not_found)?;
    Ok(scim_json(StatusCode::OK, v))
}

/// Switchyard group names are slugs: "ML Research" becomes `ml-research`.
fn group_slug(display: &str) -> String {
    let mut out = String::new();
    for c in display.trim().to_lowercase().chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(63).collect()
}

fn member_ids(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| m["value"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets a group's members (SCIM-managed ones) to exactly `wanted`, auditing each change.
async fn set_members(
    tx: &mut WriteTx,
    tenant: &str,
    meta: &RequestMeta,
    group: (&str, &str),
    add: &[String],
    remove: &[String],
) -> Result<(), ScimError> {
    let now = now_ms();
    for uid in add {
        let user: Option<String> = sqlx::query_scalar(&format!(
            "SELECT username FROM users WHERE tenant_id = $1 AND id = $2 AND {}",
            managed("users")
        ))
        .bind(tenant)
        .bind(uid)
        .fetch_optional(&mut *tx.tx)
        .await?;
        let Some(username) = user else {
            return Err(ScimError::bad(
                "invalidValue",
                format!("no user {uid} managed by SCIM in this tenant"),
            ));
        };
        let exists: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM memberships WHERE group_id = $1 AND user_id = $2",
        )
        .bind(group.0)
        .bind(uid)
        .fetch_one(&mut *tx.tx)
        .await?;
        if exists > 0 {
            continue;
        }
        sqlx::query("INSERT INTO memberships (tenant_id, group_id, user_id, created_at, source) VALUES ($1, $2, $3, $4, 'scim')")
            .bind(tenant)
            .bind(group.0)
            .bind(uid)
            .bind(now)
            .execute(&mut *tx.tx)
            .await?;
        record(
            tx,
            tenant,
            meta,
            "group.member_add",
            "group",
            group.0,
            json!({"group": group.1, "user_id": uid, "username": username, "source": "scim"}),
        )
        .await?;
    }
    for uid in remove {
        let gone = sqlx::query(&format!(
            "DELETE FROM memberships WHERE tenant_id = $1 AND group_id = $2 AND user_id = $3
             AND user_id IN (SELECT u.id FROM users u WHERE {})",
            managed("u")
        ))
        .bind(tenant)
        .bind(group.0)
        .bind(uid)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
        if gone > 0 {
            record(
                tx,
                tenant,
                meta,
                "group.member_remove",
                "group",
                group.0,
                json!({"group": group.1, "user_id": uid, "source": "scim"}),
            )
            .await?;
        }
    }
    Ok(())
}

async fn create_group(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let display = body["displayName"]
        .as_str()
        .ok_or_else(|| ScimError::bad("invalidValue", "displayName is required"))?;
    let name = group_slug(display);
    if !slug_ok(&name) {
        return Err(ScimError::bad(
            "invalidValue",
            "displayName must contain letters or digits",
        ));
    }
    let meta = meta_of(&headers);
    let id = new_id();
    let mut tx = state.store.begin_write().await?;
    let r = sqlx::query("INSERT INTO groups (id, tenant_id, name, description, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(&id)
        .bind(&tenant)
        .bind(&name)
        .bind(format!(
            "Provisioned by SCIM as “{}”",
            text::scrub(display, 200)
        ))
        .bind(now_ms())
        .execute(&mut *tx.tx)
        .await;
    if let Err(e) = r {
        return Err(unique_or(e, "a group with this name exists"));
    }
    record(
        &mut tx,
        &tenant,
        &meta,
        "group.create",
        "group",
        &id,
        json!({"name": name, "via": "scim"}),
    )
    .await?;
    set_members(
        &mut tx,
        &tenant,
        &meta,
        (&id, &name),
        &member_ids(&body["members"]),
        &[],
    )
    .await?;
    tx.commit().await?;
    let v = group_json(&state.store, &tenant, &id)
        .await?
        .ok_or_else(ScimError::not_found)?;
    Ok(scim_json(StatusCode::CREATED, v))
}

async fn current_members(
    store: &Store,
    tenant: &str,
    gid: &str,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT user_id FROM memberships WHERE tenant_id = $1 AND group_id = $2")
        .bind(tenant)
        .bind(gid)
        .fetch_all(&store.pool)
        .await
}

async fn group_name(store: &Store, tenant: &str, gid: &str) -> Result<String, ScimError> {
    let n: Option<String> =
        sqlx::query_scalar("SELECT name FROM groups WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(gid)
            .fetch_optional(&store.pool)
            .await?;
    n.ok_or_else(ScimError::not_found)
}

async fn replace_group(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let name = group_name(&state.store, &tenant, &id).await?;
    let wanted = member_ids(&body["members"]);
    let current = current_members(&state.store, &tenant, &id).await?;
    let add: Vec<String> = wanted
        .iter()
        .filter(|u| !current.contains(u))
        .cloned()
        .collect();
    let remove: Vec<String> = current
        .iter()
        .filter(|u| !wanted.contains(u))
        .cloned()
        .collect();
    let meta = meta_of(&headers);
    let mut tx = state.store.begin_write().await?;
    set_members(&mut tx, &tenant, &meta, (&id, &name), &add, &remove).await?;
    tx.commit().await?;
    get_group(State(state), headers, Path(id)).await
}

async fn patch_group(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let name = group_name(&state.store, &tenant, &id).await?;
    let meta = meta_of(&headers);
    let mut add = Vec::new();
    let mut remove = Vec::new();
    for (op, path, value) in operations(&body)? {
        match (op.as_str(), path.as_deref()) {
            ("add", Some("members")) => add.extend(member_ids(&value)),
            ("remove", Some("members")) => remove.extend(member_ids(&value)),
            // `members[value eq "id"]`
            ("remove", Some(p)) if p.starts_with("members[") => {
                let inner = p.trim_start_matches("members[").trim_end_matches(']');
                let (_, uid) = parse_filter(inner, &["value"])?;
                remove.push(uid);
            }
            ("replace", Some("members")) => {
                let wanted = member_ids(&value);
                let current = current_members(&state.store, &tenant, &id).await?;
                add.extend(wanted.iter().filter(|u| !current.contains(u)).cloned());
                remove.extend(current.into_iter().filter(|u| !wanted.contains(u)));
            }
            // Renames keep the Switchyard name (access rules and queues refer to it).
            ("replace", Some("displayName")) | ("replace", None) => {}
            (op, p) => {
                return Err(ScimError::bad(
                    "invalidPath",
                    format!("{op} {} is not supported on groups", p.unwrap_or("")),
                ))
            }
        }
    }
    let mut tx = state.store.begin_write().await?;
    set_members(&mut tx, &tenant, &meta, (&id, &name), &add, &remove).await?;
    tx.commit().await?;
    get_group(State(state), headers, Path(id)).await
}

async fn delete_group(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ScimResult {
    let tenant = tenant(&state, &headers).await?;
    let name = group_name(&state.store, &tenant, &id).await?;
    let mut tx = state.store.begin_write().await?;
    if let Some(why) = crate::store::in_use::group(&mut tx, &tenant, &id).await? {
        return Err(ScimError::new(StatusCode::CONFLICT, None, why));
    }
    sqlx::query("DELETE FROM groups WHERE tenant_id = $1 AND id = $2")
        .bind(&tenant)
        .bind(&id)
        .execute(&mut *tx.tx)
        .await?;
    record(
        &mut tx,
        &tenant,
        &meta_of(&headers),
        "group.delete",
        "group",
        &id,
        json!({"name": name, "via": "scim"}),
    )
    .await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- the tenant's SCIM token (REST under /api/v1, tenant admins) --------------------------

/// Issues the tenant's SCIM token, replacing any earlier one; shown once.
pub async fn issue_token(store: &Store, p: &Principal, meta: &RequestMeta) -> ApiResult<String> {
    require(p, Action::ManageDirectory)?;
    let token = format!("scim_{}", secret::random());
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    sqlx::query("DELETE FROM scim_tokens WHERE tenant_id = $1")
        .bind(p.tenant_id())
        .execute(&mut *tx.tx)
        .await?;
    sqlx::query("INSERT INTO scim_tokens (tenant_id, token_hash, created_at) VALUES ($1, $2, $3)")
        .bind(p.tenant_id())
        .bind(secret::digest(&token))
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "scim.token_issue",
        "tenant",
        p.tenant_id(),
        json!({}),
    )
    .await?;
    tx.commit().await?;
    Ok(token)
}

pub async fn revoke_token(store: &Store, p: &Principal, meta: &RequestMeta) -> ApiResult<()> {
    require(p, Action::ManageDirectory)?;
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    sqlx::query("DELETE FROM scim_tokens WHERE tenant_id = $1")
        .bind(p.tenant_id())
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "scim.token_revoke",
        "tenant",
        p.tenant_id(),
        json!({}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_and_group_names() {
        assert_eq!(
            parse_filter("userName eq \"bob\"", &["userName"]).unwrap(),
            ("userName".into(), "bob".into())
        );
        assert!(parse_filter("userName co \"b\"", &["userName"]).is_err());
        assert!(parse_filter("password eq \"x\"", &["userName"]).is_err());
        assert!(parse_filter("userName eq bob", &["userName"]).is_err());
        assert_eq!(group_slug("ML Research"), "ml-research");
        assert_eq!(group_slug("  Data / Eng  "), "data-eng");
    }
}
