//! Raw TCP routes (`gateway_tcp_routes`, written only here): a port of its own from
//! `gateway_tcp_ports` on one of the tenant's gateways, forwarded to an endpoint's instances
//! (`tcp.rs` is the data path). Only the listed source networks may connect; with `tls` the
//! gateway's certificate terminates TLS first, and with `client_ca` a client must also show a
//! certificate one of those authorities issued. Tenant admins create, switch and delete them;
//! a member sees those of the endpoints they may see.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::{Action, Permission};
use app::model::*;

use super::endpoints::{endpoint_with, visible_ids};
use super::names::{admin_only, check_ends, free_port};
use crate::access::exists;
use crate::audit;
use crate::config::{GatewayConfig, IpNet};
use crate::http::error::{ApiResult, AppError, Validator};
use crate::http::require;
use crate::store::{is_unique_violation, new_id, Store};

/// Tries at taking a free port before giving up (another replica may take the same one).
const PORT_ATTEMPTS: usize = 5;
/// Most networks on one route.
const MAX_SOURCES: usize = 64;
const CA_RULE: &str =
    "paste one or more certificate authorities in PEM (-----BEGIN CERTIFICATE-----), at most 64 KiB";
const CA_NEEDS_TLS: &str =
    "client certificates are asked for in the TLS handshake: turn TLS on for this route";
const SOURCES_RULE: &str =
    "list 1 to 64 networks in CIDR form, such as 10.0.0.0/8 or 2001:db8::/32 (0.0.0.0/0: any IPv4 address)";

/// The networks of `sources`, or `None` when one is not a network or there are none or
/// too many. A bare address is a network of one.
pub(crate) fn parse_sources(sources: &[String]) -> Option<Vec<IpNet>> {
    if sources.is_empty() || sources.len() > MAX_SOURCES {
        return None;
    }
    sources.iter().map(|s| IpNet::parse(s)).collect()
}

fn route_from_row(gw: &GatewayConfig, r: &AnyRow) -> Result<TcpRoute, sqlx::Error> {
    let port: i64 = r.try_get("port")?;
    let sources: String = r.try_get("sources")?;
    Ok(TcpRoute {
        id: r.try_get("id")?,
        gateway_id: r.try_get("gateway_id")?,
        endpoint_id: r.try_get("endpoint_id")?,
        port,
        tls: r.try_get::<i64, _>("tls")? != 0,
        allowed_sources: sources
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        client_ca: r.try_get("client_ca")?,
        address: std::net::SocketAddr::new(gw.bind, u16::try_from(port).unwrap_or(0)).to_string(),
        created_at: r.try_get("created_at")?,
    })
}

const COLUMNS: &str = "id, gateway_id, endpoint_id, port, tls, sources, client_ca, created_at";

/// The client certificate authorities given (blank: none), checked into `v`.
fn client_ca(v: &mut Validator, given: Option<&str>, tls: bool) -> Option<String> {
    let ca = given.map(str::trim).filter(|s| !s.is_empty())?;
    v.check(tls, "client_ca", CA_NEEDS_TLS);
    v.check(
        super::tls::client_verifier(ca).is_ok(),
        "client_ca",
        CA_RULE,
    );
    Some(format!("{ca}\n"))
}

/// The tenant's TCP routes (of one gateway, with `gateway_id`) whose endpoint the caller may
/// see.
pub async fn list(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    gateway_id: Option<&str>,
) -> ApiResult<Vec<TcpRoute>> {
    require(p, Action::ViewDirectory)?;
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM gateway_tcp_routes WHERE tenant_id = $1 AND ($2 = '' OR gateway_id = $2)
         ORDER BY port"
    ))
    .bind(p.tenant_id())
    .bind(gateway_id.unwrap_or(""))
    .fetch_all(&store.pool)
    .await?;
    let visible = visible_ids(store, p).await?;
    Ok(rows
        .iter()
        .map(|r| route_from_row(gw, r))
        .filter(|r| {
            r.as_ref()
                .map_or(true, |r| visible.contains(&r.endpoint_id))
        })
        .collect::<Result<_, _>>()?)
}

/// One of the tenant's TCP routes; 404 for anything else.
pub async fn get(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    id: &str,
) -> ApiResult<TcpRoute> {
    require(p, Action::ViewDirectory)?;
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM gateway_tcp_routes WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    let route = route_from_row(gw, &row)?;
    // One of an endpoint the caller may not see is as unknown as another tenant's.
    endpoint_with(store, p, &route.endpoint_id, Permission::View).await?;
    Ok(route)
}

fn joined(nets: &[IpNet]) -> String {
    nets.iter()
        .map(|n| format!("{}/{}", n.addr, n.prefix))
        .collect::<Vec<_>>()
        .join(",")
}

/// Opens a TCP port for an endpoint on a gateway (tenant admins): the lowest port of
/// `gateway_tcp_ports` that no route of any tenant holds (`UNIQUE (port)` settles a race with
/// another replica: the loser tries the next one).
pub async fn create(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateTcpRoute,
) -> ApiResult<TcpRoute> {
    admin_only(p)?;
    let mut v = Validator::default();
    check_ends(&mut v, store, p, &input.gateway_id, &input.endpoint_id).await?;
    let nets = parse_sources(&input.allowed_sources);
    v.check(nets.is_some(), "allowed_sources", SOURCES_RULE);
    let ca = client_ca(&mut v, input.client_ca.as_deref(), input.tls);
    v.finish()?;
    let sources = joined(&nets.unwrap_or_default());
    let (first, last) = (
        i64::from(*gw.tcp_ports.start()),
        i64::from(*gw.tcp_ports.end()),
    );
    for _ in 0..PORT_ATTEMPTS {
        let mut tx = store.begin_write().await?;
        tx.access_changed();
        let now = tx.now();
        let Some(port) = free_port(&mut tx, "gateway_tcp_routes", first, last).await? else {
            return Err(AppError::Conflict(format!(
                "No free TCP port: all {} ports of the range {first}-{last} are in use; delete a TCP route or widen gateway_tcp_ports",
                last - first + 1
            ))
            .into());
        };
        let id = new_id();
        let inserted = sqlx::query(
            "INSERT INTO gateway_tcp_routes (id, tenant_id, gateway_id, endpoint_id, port, tls, sources, client_ca, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&input.gateway_id)
        .bind(&input.endpoint_id)
        .bind(port)
        .bind(i64::from(input.tls))
        .bind(&sources)
        .bind(&ca)
        .bind(now)
        .execute(&mut *tx.tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => continue,
            Err(e) => return Err(e.into()),
        }
        audit::record(
            &mut tx,
            now,
            p,
            meta,
            "tcp_route.create",
            "tcp_route",
            &id,
            json!({"gateway_id": input.gateway_id, "endpoint_id": input.endpoint_id, "port": port,
                "tls": input.tls, "allowed_sources": sources, "client_certificates": ca.is_some()}),
        )
        .await?;
        tx.commit().await?;
        return get(store, gw, p, &id).await;
    }
    Err(AppError::Conflict("Another route took the free port meanwhile; try again".into()).into())
}

/// Points a TCP route at another endpoint or changes who may connect (tenant admins); new
/// connections follow at once, open ones are left alone.
pub async fn update(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    input: UpdateTcpRoute,
) -> ApiResult<TcpRoute> {
    let route = get(store, gw, p, id).await?;
    admin_only(p)?;
    let mut v = Validator::default();
    if let Some(e) = &input.endpoint_id {
        v.check(
            exists(store, "endpoints", p.tenant_id(), e).await?,
            "endpoint_id",
            "no such endpoint",
        );
    }
    let nets = input.allowed_sources.as_deref().map(parse_sources);
    v.check(!matches!(nets, Some(None)), "allowed_sources", SOURCES_RULE);
    // `None`: as it was; blank: no longer asked.
    let ca = match input.client_ca.as_deref() {
        None => route.client_ca.clone(),
        Some(given) => client_ca(&mut v, Some(given), route.tls),
    };
    v.finish()?;
    let endpoint_id = input.endpoint_id.unwrap_or(route.endpoint_id.clone());
    let sources = match nets.flatten() {
        Some(n) => joined(&n),
        None => route.allowed_sources.join(","),
    };
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    sqlx::query(
        "UPDATE gateway_tcp_routes SET endpoint_id = $1, sources = $2, client_ca = $3 WHERE tenant_id = $4 AND id = $5",
    )
    .bind(&endpoint_id)
    .bind(&sources)
    .bind(&ca)
    .bind(p.tenant_id())
    .bind(id)
    .execute(&mut *tx.tx)
    .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "tcp_route.update",
        "tcp_route",
        id,
        json!({"port": route.port, "from_endpoint_id": route.endpoint_id, "to_endpoint_id": endpoint_id,
            "from_allowed_sources": route.allowed_sources.join(","), "to_allowed_sources": sources,
            "from_client_certificates": route.client_ca.is_some(), "to_client_certificates": ca.is_some()}),
    )
    .await?;
    tx.commit().await?;
    get(store, gw, p, id).await
}

/// Closes a TCP route's port (tenant admins); open connections finish.
pub async fn delete(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    let route = get(store, gw, p, id).await?;
    admin_only(p)?;
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    super::names::delete_owned(&mut tx, "gateway_tcp_routes", p.tenant_id(), id).await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "tcp_route.delete",
        "tcp_route",
        id,
        json!({"port": route.port, "gateway_id": route.gateway_id, "endpoint_id": route.endpoint_id}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources() {
        let s = |v: &[&str]| parse_sources(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            joined(&s(&["10.1.2.3/8", " 192.168.0.7 ", "2001:db8::1/32"]).unwrap()),
            "10.1.2.3/8,192.168.0.7/32,2001:db8::1/32"
        );
        assert!(s(&[]).is_none());
        assert!(s(&["10.0.0.0/33"]).is_none());
        assert!(s(&["example.com"]).is_none());
        assert!(s(&["10.0.0.0/8", ""]).is_none());
        let many: Vec<String> = (0..65).map(|i| format!("10.0.0.{i}")).collect();
        assert!(parse_sources(&many).is_none());
    }
}
