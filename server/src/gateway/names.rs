//! What the gateway's resource modules share: the rule for names, the URL a gateway's route
//! is reached at, the tenant-admin check of route changes, deleting one of the gateway's rows,
//! and removing the TCP routes of a gateway or endpoint being deleted.

use std::net::SocketAddr;

use crate::config::GatewayConfig;
use crate::http::error::{ApiResult, AppError};
use crate::store::WriteTx;

/// Deletes the tenant's row `id` of one of the gateway's tables; 404 when there is none.
pub(super) async fn delete_owned(
    tx: &mut WriteTx,
    table: &str,
    tenant_id: &str,
    id: &str,
) -> ApiResult<()> {
    let gone = sqlx::query(&format!(
        "DELETE FROM {table} WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(tenant_id)
    .bind(id)
    .execute(&mut *tx.tx)
    .await?
    .rows_affected();
    if gone == 0 {
        return Err(AppError::NotFound.into());
    }
    Ok(())
}

/// Removes the TCP routes of a gateway or an endpoint being deleted (in its transaction):
/// their ports, for its audit entry.
pub(super) async fn remove_tcp_routes(
    tx: &mut WriteTx,
    tenant_id: &str,
    column: Owner,
    id: &str,
) -> Result<Vec<i64>, sqlx::Error> {
    let column = match column {
        Owner::Gateway => "gateway_id",
        Owner::Endpoint => "endpoint_id",
    };
    let ports: Vec<i64> = sqlx::query_scalar(&format!(
        "SELECT port FROM gateway_tcp_routes WHERE tenant_id = $1 AND {column} = $2 ORDER BY port"
    ))
    .bind(tenant_id)
    .bind(id)
    .fetch_all(&mut *tx.tx)
    .await?;
    sqlx::query(&format!(
        "DELETE FROM gateway_tcp_routes WHERE tenant_id = $1 AND {column} = $2"
    ))
    .bind(tenant_id)
    .bind(id)
    .execute(&mut *tx.tx)
    .await?;
    Ok(ports)
}

/// What a removed row held TCP routes through.
pub(super) enum Owner {
    Gateway,
    Endpoint,
}

/// The lowest port of `first..=last` that no row of `table` (`gateways`,
/// `gateway_tcp_routes`) holds; `None` when every one is taken. Its `UNIQUE (port)` settles a
/// race with another replica: the loser's insert fails and it looks again.
pub(super) async fn free_port(
    tx: &mut WriteTx,
    table: &str,
    first: i64,
    last: i64,
) -> Result<Option<i64>, sqlx::Error> {
    let used: Vec<i64> = sqlx::query_scalar(&format!(
        "SELECT port FROM {table} WHERE port >= $1 AND port <= $2 ORDER BY port"
    ))
    .bind(first)
    .bind(last)
    .fetch_all(&mut *tx.tx)
    .await?;
    Ok((first..=last).find(|port| used.binary_search(port).is_err()))
}

/// Checks at their fields that a new route's gateway and endpoint are the caller's tenant's.
pub(super) async fn check_ends(
    v: &mut crate::http::error::Validator,
    store: &crate::store::Store,
    p: &app::model::Principal,
    gateway_id: &str,
    endpoint_id: &str,
) -> Result<(), sqlx::Error> {
    let tenant = p.tenant_id();
    v.check(
        crate::access::exists(store, "gateways", tenant, gateway_id).await?,
        "gateway_id",
        "no such gateway",
    );
    v.check(
        crate::access::exists(store, "endpoints", tenant, endpoint_id).await?,
        "endpoint_id",
        "no such endpoint",
    );
    Ok(())
}

/// 403 unless the caller is a tenant admin (who alone changes routes).
pub(super) fn admin_only(p: &app::model::Principal) -> ApiResult<()> {
    crate::http::require(p, app::access::Action::ViewDirectory)?;
    if crate::access::is_admin(p) {
        Ok(())
    } else {
        Err(AppError::Forbidden.into())
    }
}

/// What endpoint and gateway names may be: 1 to 100 of `a-z`, `0-9` and `-`.
pub(crate) fn name_ok(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

pub(crate) const NAME_RULE: &str = "must be 1 to 100 characters of a-z, 0-9 and -";

/// `https://{host}:{port}` (`http` when the gateways listen without TLS), with the
/// listeners' bind address when `host` is empty.
pub(crate) fn base_url(gw: &GatewayConfig, host: &str, port: i64) -> String {
    let port = u16::try_from(port).unwrap_or(0);
    let scheme = if gw.plain_http { "http" } else { "https" };
    if host.is_empty() {
        format!("{scheme}://{}", SocketAddr::new(gw.bind, port))
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let mut gw = GatewayConfig::default();
        assert_eq!(base_url(&gw, "", 18400), "https://127.0.0.1:18400");
        gw.plain_http = true;
        assert_eq!(base_url(&gw, "", 18400), "http://127.0.0.1:18400");
        assert_eq!(
            base_url(&gw, "api.acme.dev", 18401),
            "http://api.acme.dev:18401"
        );
        gw.bind = "::1".parse().unwrap();
        assert_eq!(base_url(&gw, "", 18402), "http://[::1]:18402");
    }
}
