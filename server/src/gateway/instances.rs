//! Gateways (`gateways`, written only here): namespace-scoped instances (prod, dev, ...) of a
//! tenant, each with its own listener port, given from the server's configured range when it
//! is created, and its own tokens. Every member sees the tenant's gateways; tenant admins
//! create and delete them.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::names::{base_url, free_port, name_ok, Owner, NAME_RULE};
use crate::access::is_admin;
use crate::audit;
use crate::config::GatewayConfig;
use crate::http::error::{ApiError, ApiResult, AppError, Validator};
use crate::http::require;
use crate::store::{is_unique_violation, new_id, Store};

/// Tries at taking a free port before giving up (another replica may take the same one).
const PORT_ATTEMPTS: usize = 5;

fn gateway_from_row(gw: &GatewayConfig, r: &AnyRow) -> Result<Gateway, sqlx::Error> {
    let port: i64 = r.try_get("port")?;
    let name: String = r.try_get("name")?;
    let slug: String = r.try_get("tenant_slug")?;
    Ok(Gateway {
        id: r.try_get("id")?,
        certificate: certificate_source(gw, &slug, &name),
        name,
        port,
        url: base_url(gw, "", port),
        created_at: r.try_get("created_at")?,
    })
}

/// Where a gateway's certificate comes from: the operator's files when they are there and
/// make a certificate the listener can present (read as its listener reads them), else
/// a self-signed one. Files that are there but unusable stop the listener (it does not fall
/// back to a certificate the operator did not choose): said so, without their paths or why.
fn certificate_source(gw: &GatewayConfig, tenant_slug: &str, name: &str) -> CertificateSource {
    if gw.plain_http {
        return CertificateSource::None;
    }
    match gw
        .tls_dir
        .as_deref()
        .and_then(|dir| super::tls::from_dir(dir, tenant_slug, name))
    {
        Some(Ok(_)) => CertificateSource::Operator,
        Some(Err(_)) => CertificateSource::Unusable,
        None => CertificateSource::SelfSigned,
    }
}

const GATEWAY_COLUMNS: &str =
    "g.id, g.name, g.port, g.created_at, t.slug AS tenant_slug FROM gateways g JOIN tenants t ON t.id = g.tenant_id";

/// The tenant's gateways, in name order (every member sees them).
pub async fn list_gateways(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
) -> ApiResult<Vec<Gateway>> {
    require(p, Action::ViewDirectory)?;
    let rows = sqlx::query(&format!(
        "SELECT {GATEWAY_COLUMNS} WHERE g.tenant_id = $1 ORDER BY g.name, g.id"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows
        .iter()
        .map(|r| gateway_from_row(gw, r))
        .collect::<Result<_, _>>()?)
}

/// One of the tenant's gateways; 404 for anything else.
pub async fn get_gateway(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    id: &str,
) -> ApiResult<Gateway> {
    require(p, Action::ViewDirectory)?;
    let row = sqlx::query(&format!(
        "SELECT {GATEWAY_COLUMNS} WHERE g.tenant_id = $1 AND g.id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(gateway_from_row(gw, &row)?)
}

/// The answer when a tenant already has a gateway of this name.
fn name_taken(name: &str) -> ApiError {
    ApiError(AppError::Conflict(format!(
        "name: a gateway named {name} already exists in your organization"
    )))
}

/// Creates a gateway (tenant admins): it gets the lowest port of the configured range that no
/// gateway of any tenant holds. The `UNIQUE (port)` key settles a race with another replica:
/// the loser tries the next free port, a few times.
pub async fn create_gateway(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateGateway,
) -> ApiResult<Gateway> {
    require(p, Action::ViewDirectory)?;
    if !is_admin(p) {
        return Err(ApiError(AppError::Forbidden));
    }
    let name = input.name.trim().to_string();
    Validator::default()
        .check(name_ok(&name), "name", NAME_RULE)
        .finish()?;
    let (first, last) = (i64::from(*gw.ports.start()), i64::from(*gw.ports.end()));
    for _ in 0..PORT_ATTEMPTS {
        let mut tx = store.begin_write().await?;
        tx.access_changed();
        let now = tx.now();
        let taken: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM gateways WHERE tenant_id = $1 AND name = $2")
                .bind(p.tenant_id())
                .bind(&name)
                .fetch_one(&mut *tx.tx)
                .await?;
        if taken > 0 {
            return Err(name_taken(&name));
        }
        let Some(port) = free_port(&mut tx, "gateways", first, last).await? else {
            return Err(AppError::Conflict(format!(
                "No free gateway port: all {} ports of the range {first}-{last} are in use; delete a gateway or widen gateway_ports",
                last - first + 1
            ))
            .into());
        };
        let id = new_id();
        let inserted = sqlx::query(
            "INSERT INTO gateways (id, tenant_id, name, port, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&name)
        .bind(port)
        .bind(now)
        .execute(&mut *tx.tx)
        .await;
        match inserted {
            Ok(_) => {}
            // The port (or the name) was taken meanwhile: look again in a new transaction.
            Err(e) if is_unique_violation(&e) => continue,
            Err(e) => return Err(e.into()),
        }
        audit::record(
            &mut tx,
            now,
            p,
            meta,
            "gateway.create",
            "gateway",
            &id,
            json!({"name": name, "port": port}),
        )
        .await?;
        tx.commit().await?;
        return get_gateway(store, gw, p, &id).await;
    }
    Err(AppError::Conflict("Another gateway took the free port meanwhile; try again".into()).into())
}

/// Deletes a gateway (tenant admins), with its routes and tokens; its port is free again.
pub async fn delete_gateway(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    let g = get_gateway(store, gw, p, id).await?;
    if !is_admin(p) {
        return Err(ApiError(AppError::Forbidden));
    }
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    let routes = sqlx::query(
        "SELECT id, host, path_prefix, endpoint_id FROM gateway_routes WHERE tenant_id = $1 AND gateway_id = $2 ORDER BY host, path_prefix",
    )
    .bind(p.tenant_id())
    .bind(id)
    .fetch_all(&mut *tx.tx)
    .await?
    .iter()
    .map(|r| {
        Ok(json!({
            "id": r.try_get::<String, _>("id")?,
            "host": r.try_get::<String, _>("host")?,
            "path_prefix": r.try_get::<String, _>("path_prefix")?,
            "endpoint_id": r.try_get::<String, _>("endpoint_id")?,
        }))
    })
    .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let tokens = sqlx::query("DELETE FROM gateway_tokens WHERE tenant_id = $1 AND gateway_id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
    sqlx::query("DELETE FROM gateway_routes WHERE tenant_id = $1 AND gateway_id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    let tcp_ports =
        super::names::remove_tcp_routes(&mut tx, p.tenant_id(), Owner::Gateway, id).await?;
    super::names::delete_owned(&mut tx, "gateways", p.tenant_id(), id).await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "gateway.delete",
        "gateway",
        id,
        json!({"name": g.name, "port": g.port, "routes_removed": routes, "tokens_removed": tokens, "tcp_ports_closed": tcp_ports}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
