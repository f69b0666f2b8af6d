//! What the gateway's resource modules share: the rule for names, the URL a gateway's route
//! is reached at, and deleting one of the gateway's rows.

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
