//! SCIM 2.0 (RFC 7643/7644) so an IdP can push users and groups and deprovision them before
//! they ever sign in: `/scim/v2/Users` and `/scim/v2/Groups` (list and search with filters,
//! paging and attribute selection, create, read, replace, patch, delete), `/.search` over
//! both, and the discovery documents `ServiceProviderConfig`, `ResourceTypes` and `Schemas`
//! (each also by id). Each tenant has its own bearer token (`POST /api/v1/scim/token`, shown
//! once, stored as SHA-256, replaced by the next one, revoked with `DELETE`). Every answer
//! under `/scim/v2`, an error or an unknown path included, is `application/scim+json`.
//!
//! Users created here have no password and are marked `provisioned_by = 'scim'`; their first
//! SSO sign-in links to them when the IdP's verified e-mail address equals theirs, in one of the
//! provider's allowed domains (`identity::sso::link`). `active: false` disables the user, which
//! ends every session and API token on their next request. Every change is audited with actor
//! `scim`.

mod attributes;
mod errors;
mod groups;
mod patch;
mod query;
mod schemas;
mod token;
mod users;

use axum::extract::FromRef;
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::{any, get, post, MethodRouter};
use axum::Router;
use serde_json::Value;

use app::model::RequestMeta;

pub use self::errors::ScimError;
use self::errors::{ScimJson, ScimResult};
use self::query::ListParams;
pub use self::token::{issue_token, revoke_token, token_issued_at};
use crate::audit::{self, Actor, Record};
use crate::identity::secret;
use crate::store::{Store, WriteTx};

const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
const LIST_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
const ERROR_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
const PATCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const SEARCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:SearchRequest";

/// Where SCIM is served.
const BASE: &str = "/scim/v2";

/// A route whose other methods answer a SCIM 405.
fn scim<S: Clone + Send + Sync + 'static>(route: MethodRouter<S>) -> MethodRouter<S> {
    route.fallback(errors::method_not_allowed)
}

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
{
    use self::schemas as s;
    use self::{groups as g, users as u};
    Router::new()
        .route(
            "/scim/v2/ServiceProviderConfig",
            scim(get(s::service_provider_config)),
        )
        .route("/scim/v2/ResourceTypes", scim(get(s::resource_types)))
        .route("/scim/v2/ResourceTypes/{id}", scim(get(s::resource_type)))
        .route("/scim/v2/Schemas", scim(get(s::schemas)))
        .route("/scim/v2/Schemas/{id}", scim(get(s::schema)))
        .route("/scim/v2/.search", scim(post(search)))
        .route(
            "/scim/v2/Users",
            scim(get(u::list_users).post(u::create_user)),
        )
        .route("/scim/v2/Users/.search", scim(post(u::search_users)))
        .route(
            "/scim/v2/Users/{id}",
            scim(
                get(u::get_user)
                    .put(u::replace_user)
                    .patch(u::patch_user)
                    .delete(u::delete_user),
            ),
        )
        .route(
            "/scim/v2/Groups",
            scim(get(g::list_groups).post(g::create_group)),
        )
        .route("/scim/v2/Groups/.search", scim(post(g::search_groups)))
        .route(
            "/scim/v2/Groups/{id}",
            scim(
                get(g::get_group)
                    .put(g::replace_group)
                    .patch(g::patch_group)
                    .delete(g::delete_group),
            ),
        )
        .route("/scim/v2", any(errors::unknown_endpoint))
        .route("/scim/v2/", any(errors::unknown_endpoint))
        .route("/scim/v2/{*rest}", any(errors::unknown_endpoint))
}

/// The URI of a SCIM resource or document (`id` empty: the endpoint itself).
fn location(endpoint: &str, id: &str) -> String {
    if id.is_empty() {
        format!("{BASE}/{endpoint}")
    } else {
        format!("{BASE}/{endpoint}/{id}")
    }
}

/// The tenant whose SCIM token this request carries.
async fn tenant(store: &Store, headers: &HeaderMap) -> Result<String, ScimError> {
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
            .fetch_optional(&store.pool)
            .await?;
    t.ok_or_else(unauthorized)
}

/// Appends an audit entry by actor `scim` in the caller's write transaction.
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
        tx.now(),
        Record {
            tenant_id,
            actor: &Actor::system("scim"),
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

/// `POST /scim/v2/.search`: users and groups together (RFC 7644 §3.4.3), each matched and
/// narrowed by its own schema.
async fn search(
    axum::extract::State(store): axum::extract::State<Store>,
    headers: HeaderMap,
    ScimJson(body): ScimJson,
) -> ScimResult {
    let tenant = tenant(&store, &headers).await?;
    let params = ListParams::from_search(&body)?;
    params.check_filter(&[&schemas::USER, &schemas::GROUP])?;
    let mut items: Vec<Value> = users::all(&store, &tenant)
        .await?
        .into_iter()
        .filter(|u| {
            params
                .filter
                .as_ref()
                .is_none_or(|f| f.matches(u, &schemas::USER, None))
        })
        .map(|u| params.selection.apply(&schemas::USER, u))
        .collect();
    for g in groups::all(&store, &tenant, params.filter.as_ref()).await? {
        items.push(params.selection.apply(&schemas::GROUP, g));
    }
    Ok(params.respond(items))
}
