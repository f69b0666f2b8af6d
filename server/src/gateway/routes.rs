//! Routes (`gateway_routes`, written only here): a stable host and/or path prefix on one of the
//! tenant's gateways that leads to an endpoint. A member sees those of the endpoints they may
//! see; tenant admins create, switch and delete them. Switching a route to another endpoint keeps its URL.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::{Action, Permission};
use app::model::*;

use super::endpoints::{dns_name_ok, endpoint_with, visible_ids};
use super::names::{admin_only, check_ends};
use crate::access::exists;
use crate::audit;
use crate::http::error::{unique_violation_as, ApiResult, AppError, Validator};
use crate::http::require;
use crate::store::{new_id, Store};

/// Whether a path prefix may be published: starts with `/`, at most 200 characters, no `..`,
/// no query or fragment, no whitespace or control characters.
pub(crate) fn path_prefix_ok(prefix: &str) -> bool {
    prefix.starts_with('/')
        && prefix.chars().count() <= 200
        && !prefix.contains("..")
        && !prefix
            .chars()
            .any(|c| c == '?' || c == '#' || c.is_whitespace() || c.is_control())
}

const PREFIX_RULE: &str =
    "must start with /, at most 200 characters, without .., ?, #, spaces or control characters";
const HOST_RULE: &str =
    "must be empty (any host) or a DNS name of a-z, 0-9, - and . (at most 253 characters)";

fn route_from_row(r: &AnyRow) -> Result<GatewayRoute, sqlx::Error> {
    Ok(GatewayRoute {
        id: r.try_get("id")?,
        gateway_id: r.try_get("gateway_id")?,
        host: r.try_get("host")?,
        path_prefix: r.try_get("path_prefix")?,
        endpoint_id: r.try_get("endpoint_id")?,
        created_at: r.try_get("created_at")?,
    })
}

const ROUTE_COLUMNS: &str = "id, gateway_id, host, path_prefix, endpoint_id, created_at";

/// The tenant's routes (of one gateway, with `gateway_id`) whose endpoint the caller may see.
pub async fn list_routes(
    store: &Store,
    p: &Principal,
    gateway_id: Option<&str>,
) -> ApiResult<Vec<GatewayRoute>> {
    require(p, Action::ViewDirectory)?;
    let rows = sqlx::query(&format!(
        "SELECT {ROUTE_COLUMNS} FROM gateway_routes WHERE tenant_id = $1 AND ($2 = '' OR gateway_id = $2)
         ORDER BY gateway_id, host, path_prefix, id"
    ))
    .bind(p.tenant_id())
    .bind(gateway_id.unwrap_or(""))
    .fetch_all(&store.pool)
    .await?;
    let visible = visible_ids(store, p).await?;
    Ok(rows
        .iter()
        .map(route_from_row)
        .filter(|r| {
            r.as_ref()
                .map_or(true, |r| visible.contains(&r.endpoint_id))
        })
        .collect::<Result<_, _>>()?)
}

/// One of the tenant's routes; 404 for anything else.
pub async fn get_route(store: &Store, p: &Principal, id: &str) -> ApiResult<GatewayRoute> {
    require(p, Action::ViewDirectory)?;
    let row = sqlx::query(&format!(
        "SELECT {ROUTE_COLUMNS} FROM gateway_routes WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    let route = route_from_row(&row)?;
    // One of an endpoint the caller may not see is as unknown as another tenant's.
    endpoint_with(store, p, &route.endpoint_id, Permission::View).await?;
    Ok(route)
}

/// Publishes an endpoint on a gateway under a host and/or path prefix (tenant admins).
pub async fn create_route(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateGatewayRoute,
) -> ApiResult<GatewayRoute> {
    admin_only(p)?;
    let host = input.host.trim().to_ascii_lowercase();
    let prefix = input.path_prefix.clone();
    let mut v = Validator::default();
    check_ends(&mut v, store, p, &input.gateway_id, &input.endpoint_id).await?;
    v.check(path_prefix_ok(&prefix), "path_prefix", PREFIX_RULE);
    v.check(
        host.is_empty() || dns_name_ok(&host, false),
        "host",
        HOST_RULE,
    );
    v.finish()?;
    let id = new_id();
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    sqlx::query("INSERT INTO gateway_routes (id, tenant_id, gateway_id, host, path_prefix, endpoint_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&input.gateway_id)
        .bind(&host)
        .bind(&prefix)
        .bind(&input.endpoint_id)
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| {
            unique_violation_as(
                e,
                AppError::Conflict(format!(
                    "path_prefix: this gateway already routes {}{prefix}",
                    if host.is_empty() { "any host" } else { &host },
                )),
            )
        })?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "route.create",
        "route",
        &id,
        json!({"gateway_id": input.gateway_id, "host": host, "path_prefix": prefix, "endpoint_id": input.endpoint_id}),
    )
    .await?;
    tx.commit().await?;
    get_route(store, p, &id).await
}

/// Points a route at another endpoint of the tenant (tenant admins); its URL stays.
pub async fn update_route(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    input: UpdateGatewayRoute,
) -> ApiResult<GatewayRoute> {
    let route = get_route(store, p, id).await?;
    admin_only(p)?;
    Validator::default()
        .check(
            exists(store, "endpoints", p.tenant_id(), &input.endpoint_id).await?,
            "endpoint_id",
            "no such endpoint",
        )
        .finish()?;
    if route.endpoint_id == input.endpoint_id {
        return Ok(route);
    }
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    let changed =
        sqlx::query("UPDATE gateway_routes SET endpoint_id = $1 WHERE tenant_id = $2 AND id = $3")
            .bind(&input.endpoint_id)
            .bind(p.tenant_id())
            .bind(id)
            .execute(&mut *tx.tx)
            .await?
            .rows_affected();
    if changed == 0 {
        return Err(AppError::NotFound.into());
    }
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "route.update",
        "route",
        id,
        json!({"gateway_id": route.gateway_id, "host": route.host, "path_prefix": route.path_prefix,
            "from_endpoint_id": route.endpoint_id, "to_endpoint_id": input.endpoint_id}),
    )
    .await?;
    tx.commit().await?;
    get_route(store, p, id).await
}

/// Removes a route (tenant admins); the endpoint stays.
pub async fn delete_route(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    let route = get_route(store, p, id).await?;
    admin_only(p)?;
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    super::names::delete_owned(&mut tx, "gateway_routes", p.tenant_id(), id).await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "route.delete",
        "route",
        id,
        json!({"gateway_id": route.gateway_id, "host": route.host, "path_prefix": route.path_prefix, "endpoint_id": route.endpoint_id}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        for ok in ["/", "/v1/chat", "/llama-3/", "/a%20b", "/a.b/c"] {
            assert!(path_prefix_ok(ok), "{ok:?}");
        }
        for bad in [
            "", "v1", "/a/../b", "/a?b", "/a#b", "/a b", "/a\tb", "/a\u{7f}",
        ] {
            assert!(!path_prefix_ok(bad), "{bad:?}");
        }
        assert!(path_prefix_ok(&format!("/{}", "a".repeat(199))));
        assert!(!path_prefix_ok(&format!("/{}", "a".repeat(200))));
    }
}
