//! Tenants: created and listed by platform admins, who see each tenant's size but never its
//! contents.

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::access::Action;
use app::model::*;

use crate::audit::{self, Actor, Record};
use crate::http::error::{unique_violation_as, ApiResult, AppError, Problem, Validator};
use crate::http::extract::ApiJson;
use crate::http::require;
use crate::http::text::slug_ok;
use crate::http::text::{clean_text, UNCLEAN};
use crate::http::Caller;
use crate::store::{new_id, Store};

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list_tenants_handler, create_tenant_handler))
        .routes(routes!(get_tenant_handler))
}

const SUMMARY_SELECT: &str = "SELECT t.id, t.slug, t.name, t.created_at,
    (SELECT COUNT(*) FROM users u WHERE u.tenant_id = t.id) AS users,
    (SELECT COUNT(*) FROM groups g WHERE g.tenant_id = t.id) AS groups_count,
    (SELECT COUNT(*) FROM projects p WHERE p.tenant_id = t.id) AS projects
    FROM tenants t";

fn summary_from_row(r: &AnyRow) -> Result<TenantSummary, sqlx::Error> {
    Ok(TenantSummary {
        id: r.try_get("id")?,
        slug: r.try_get("slug")?,
        name: r.try_get("name")?,
        users: r.try_get("users")?,
        groups: r.try_get("groups_count")?,
        projects: r.try_get("projects")?,
        created_at: r.try_get("created_at")?,
    })
}

pub async fn list_tenants(store: &Store, p: &Principal) -> ApiResult<Vec<TenantSummary>> {
    require(p, Action::ManagePlatform)?;
    let rows = sqlx::query(&format!("{SUMMARY_SELECT} ORDER BY t.slug"))
        .fetch_all(&store.pool)
        .await?;
    Ok(rows
        .iter()
        .map(summary_from_row)
        .collect::<Result<Vec<_>, _>>()?)
}

pub async fn get_tenant(store: &Store, p: &Principal, id: &str) -> ApiResult<TenantSummary> {
    require(p, Action::ManagePlatform)?;
    let row = sqlx::query(&format!("{SUMMARY_SELECT} WHERE t.id = $1 OR t.slug = $1"))
        .bind(id)
        .fetch_optional(&store.pool)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok(summary_from_row(&row)?)
}

/// Creates a tenant with its first audit entry (its chain starts with its own creation).
pub async fn insert_tenant(
    store: &Store,
    actor: &Actor,
    meta: &RequestMeta,
    input: CreateTenant,
) -> ApiResult<Tenant> {
    let slug = input.slug.trim().to_lowercase();
    let name = input.name.trim().to_string();
    let mut v = Validator::default();
    v.check(
        slug_ok(&slug),
        "slug",
        "use 1 to 63 lower-case letters, digits and dashes",
    );
    v.check(
        !name.is_empty() && name.chars().count() <= 100,
        "name",
        "must be 1 to 100 characters",
    );
    v.check(clean_text(&name), "name", UNCLEAN);
    v.finish()?;
    let now = store.now();
    let tenant = Tenant {
        id: new_id(),
        slug,
        name,
        created_at: now,
    };
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO tenants (id, slug, name, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&tenant.id)
        .bind(&tenant.slug)
        .bind(&tenant.name)
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| {
            unique_violation_as(e, AppError::field("slug", "a tenant with this slug exists"))
        })?;
    audit::append(
        &mut tx,
        now,
        Record {
            tenant_id: &tenant.id,
            actor,
            action: "tenant.create",
            target_kind: "tenant",
            target_id: &tenant.id,
            summary: json!({"slug": tenant.slug, "name": tenant.name}),
            meta,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(tenant)
}

pub async fn create_tenant(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateTenant,
) -> ApiResult<Tenant> {
    require(p, Action::ManagePlatform)?;
    insert_tenant(store, &Actor::of(p), meta, input).await
}

/// Tenants with their user, group and project counts (platform admins).
#[utoipa::path(get, path = "/tenants", tag = "tenants", responses((status = 200, body = Vec<TenantSummary>), (status = 403, body = Problem)))]
async fn list_tenants_handler(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<TenantSummary>>> {
    Ok(Json(list_tenants(&store, &p).await?))
}

#[utoipa::path(post, path = "/tenants", tag = "tenants", request_body = CreateTenant, responses((status = 201, body = Tenant), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn create_tenant_handler(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateTenant>,
) -> ApiResult<(StatusCode, Json<Tenant>)> {
    Ok((
        StatusCode::CREATED,
        Json(create_tenant(&store, &p, &meta, input).await?),
    ))
}

/// One tenant by id or slug.
#[utoipa::path(get, path = "/tenants/{id}", tag = "tenants", params(("id" = String, Path)), responses((status = 200, body = TenantSummary), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn get_tenant_handler(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<TenantSummary>> {
    Ok(Json(get_tenant(&store, &p, &id).await?))
}

/// Turns password sign-in on or off for a tenant (its SSO settings), in the caller's
/// transaction: `tenants` is written only here.
pub async fn set_password_login(
    tx: &mut crate::store::WriteTx,
    tenant_id: &str,
    on: bool,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE tenants SET password_login = $1 WHERE id = $2")
        .bind(crate::store::flag(on))
        .bind(tenant_id)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}
