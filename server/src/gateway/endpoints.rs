//! Endpoints: a project's named services (`endpoints`) and their upstream instances
//! (`endpoint_targets`), written only here. Who may see, call and change one is decided by
//! access rules of kind `endpoint` (`view`, `use`, `manage`), inherited down the project tree
//! as for models; the owner and tenant admins administer it.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::{effective, Action, Permission, ResourceKind, Rule, Subject, Target};
use app::model::*;

use super::names::{name_ok, Owner, NAME_RULE};
use crate::access::{groups_of, is_admin, project_chain, project_parents, rules_for};
use crate::audit;
use crate::config::GatewayConfig;
use crate::http::error::{unique_violation_as, ApiError, ApiResult, AppError, Validator};
use crate::http::require;
use crate::store::{flag, new_id, Store};

/// Most targets one endpoint is created with.
const MAX_TARGETS: usize = 100;

/// A DNS name: labels of 1 to 63 characters (`a-z`, `0-9`, `-`, and `_` where
/// `underscore`), not starting or ending with `-`, at most 253 characters in all. Expects
/// lower case.
pub(crate) fn dns_name_ok(host: &str, underscore: bool) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| {
                    b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b == b'-'
                        || (underscore && b == b'_')
                })
        })
}

/// An upstream address, `host:port` (a DNS name, an IPv4 address or a bracketed IPv6 one; a
/// port 1 to 65535; no scheme or path), in its stored form (host lower-cased, port without
/// leading zeros). `None` when it is not one.
pub(crate) fn parse_address(s: &str) -> Option<String> {
    let s = s.trim();
    if s.is_empty() || s.len() > 255 {
        return None;
    }
    let (host, port) = match s.strip_prefix('[') {
        Some(rest) => {
            let (h, p) = rest.split_once("]:")?;
            let ip: Ipv6Addr = h.parse().ok()?;
            (format!("[{ip}]"), p)
        }
        None => {
            let (h, p) = s.rsplit_once(':')?;
            let h = h.to_ascii_lowercase();
            dns_name_ok(&h, true).then_some((h, p))?
        }
    };
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port: u32 = port.parse().ok()?;
    (1..=65535)
        .contains(&port)
        .then(|| format!("{host}:{port}"))
}

const ADDRESS_RULE: &str =
    "must be host:port (a DNS name or IP address and a port 1 to 65535, no scheme), at most 255 characters";

/// An endpoint row as stored.
#[derive(Clone, Debug)]
pub(crate) struct EndpointRow {
    pub id: String,
    pub project_id: String,
    pub name: String,
    pub public: bool,
    pub owner_id: Option<String>,
    pub created_at: i64,
}

const ENDPOINT_COLUMNS: &str = "id, project_id, name, public, owner_id, created_at";

fn endpoint_from_row(r: &AnyRow) -> Result<EndpointRow, sqlx::Error> {
    Ok(EndpointRow {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        name: r.try_get("name")?,
        public: r.try_get::<i64, _>("public")? != 0,
        owner_id: r.try_get("owner_id")?,
        created_at: r.try_get("created_at")?,
    })
}

/// What the caller holds on resources of one kind: read once per request, then evaluated per
/// resource through [`app::access::effective`].
pub(crate) struct Rights {
    kind: ResourceKind,
    user_id: String,
    groups: Vec<String>,
    admin: bool,
    rules: Vec<Rule>,
    parents: BTreeMap<String, Option<String>>,
}

impl Rights {
    pub(crate) async fn load(
        store: &Store,
        p: &Principal,
        kind: ResourceKind,
    ) -> Result<Rights, sqlx::Error> {
        Ok(Rights {
            kind,
            user_id: p.user_id().to_string(),
            groups: groups_of(store, p).await?,
            admin: is_admin(p),
            rules: rules_for(store, p.tenant_id(), kind).await?,
            parents: project_parents(store, p.tenant_id()).await?,
        })
    }

    /// The caller's permission on one resource (for a project: `id` is the project).
    pub(crate) fn of(&self, id: &str, project_id: &str, owner: Option<&str>) -> Option<Permission> {
        let chain = project_chain(&self.parents, project_id);
        let subject = Subject {
            user_id: &self.user_id,
            groups: &self.groups,
            tenant_admin: self.admin,
        };
        let target = Target {
            kind: self.kind,
            id,
            projects: &chain,
            owner,
        };
        effective(&subject, &self.rules, &target)
    }

    pub(crate) fn on_endpoint(&self, e: &EndpointRow) -> Option<Permission> {
        self.of(&e.id, &e.project_id, e.owner_id.as_deref())
    }
}

/// The tenant's endpoints (one, with `only`), in name order, as stored.
pub(crate) async fn endpoint_rows(
    store: &Store,
    tenant_id: &str,
    only: Option<&str>,
) -> Result<Vec<EndpointRow>, sqlx::Error> {
    sqlx::query(&format!(
        "SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE tenant_id = $1 AND ($2 = '' OR id = $2) ORDER BY name, id"
    ))
    .bind(tenant_id)
    .bind(only.unwrap_or(""))
    .fetch_all(&store.pool)
    .await?
    .iter()
    .map(endpoint_from_row)
    .collect()
}

/// The ids of the tenant's endpoints the caller may see (every one for a tenant admin): what
/// lists of routes are filtered by, so a route does not name an endpoint its reader may not
/// see.
pub(crate) async fn visible_ids(
    store: &Store,
    p: &Principal,
) -> Result<std::collections::HashSet<String>, sqlx::Error> {
    let rights = Rights::load(store, p, ResourceKind::Endpoint).await?;
    Ok(endpoint_rows(store, p.tenant_id(), None)
        .await?
        .into_iter()
        .filter(|e| rights.on_endpoint(e).is_some())
        .map(|e| e.id)
        .collect())
}

/// The endpoint if the caller holds at least `needed` on it: 404 when they may not see it (as
/// for another tenant's), 403 when they see it but may not do this.
pub(crate) async fn endpoint_with(
    store: &Store,
    p: &Principal,
    id: &str,
    needed: Permission,
) -> ApiResult<EndpointRow> {
    require(p, Action::ViewDirectory)?;
    let row = endpoint_rows(store, p.tenant_id(), Some(id))
        .await?
        .pop()
        .ok_or(AppError::NotFound)?;
    let rights = Rights::load(store, p, ResourceKind::Endpoint).await?;
    match rights.on_endpoint(&row) {
        None => Err(AppError::NotFound.into()),
        Some(have) if have < needed => Err(AppError::Forbidden.into()),
        Some(_) => Ok(row),
    }
}

/// The rows with their targets and URLs (read for the whole tenant in two queries).
async fn assemble(
    store: &Store,
    gw: &GatewayConfig,
    tenant_id: &str,
    rows: Vec<EndpointRow>,
) -> ApiResult<Vec<Endpoint>> {
    let mut targets: BTreeMap<String, Vec<EndpointTarget>> = BTreeMap::new();
    for r in sqlx::query(
        "SELECT id, endpoint_id, address, created_at FROM endpoint_targets WHERE tenant_id = $1 ORDER BY address, id",
    )
    .bind(tenant_id)
    .fetch_all(&store.pool)
    .await?
    {
        targets
            .entry(r.try_get("endpoint_id")?)
            .or_default()
            .push(EndpointTarget {
                id: r.try_get("id")?,
                address: r.try_get("address")?,
                created_at: r.try_get("created_at")?,
            });
    }
    let mut urls: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in sqlx::query(
        "SELECT r.endpoint_id, r.host, r.path_prefix, g.port FROM gateway_routes r JOIN gateways g ON g.id = r.gateway_id
         WHERE r.tenant_id = $1 ORDER BY g.name, r.host, r.path_prefix",
    )
    .bind(tenant_id)
    .fetch_all(&store.pool)
    .await?
    {
        let host: String = r.try_get("host")?;
        let prefix: String = r.try_get("path_prefix")?;
        let url = super::names::base_url(gw, &host, r.try_get("port")?);
        urls.entry(r.try_get("endpoint_id")?)
            .or_default()
            .push(format!("{url}{prefix}"));
    }
    Ok(rows
        .into_iter()
        .map(|e| Endpoint {
            targets: targets.remove(&e.id).unwrap_or_default(),
            urls: urls.remove(&e.id).unwrap_or_default(),
            id: e.id,
            project_id: e.project_id,
            name: e.name,
            public: e.public,
            owner_id: e.owner_id,
            created_at: e.created_at,
        })
        .collect())
}

/// The endpoints the caller may see, in name order.
pub async fn list_endpoints(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
) -> ApiResult<Vec<Endpoint>> {
    require(p, Action::ViewDirectory)?;
    let rights = Rights::load(store, p, ResourceKind::Endpoint).await?;
    let rows = endpoint_rows(store, p.tenant_id(), None)
        .await?
        .into_iter()
        .filter(|e| rights.on_endpoint(e).is_some())
        .collect();
    assemble(store, gw, p.tenant_id(), rows).await
}

/// One endpoint; 404 when the caller may not see it.
pub async fn get_endpoint(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    id: &str,
) -> ApiResult<Endpoint> {
    let row = endpoint_with(store, p, id, Permission::View).await?;
    assemble(store, gw, p.tenant_id(), vec![row])
        .await?
        .pop()
        .ok_or_else(|| AppError::NotFound.into())
}

/// Creates an endpoint in a project the caller may `use`, owned by the caller, with its first
/// targets. Only tenant admins may make one public.
pub async fn create_endpoint(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateEndpoint,
) -> ApiResult<Endpoint> {
    require(p, Action::ViewDirectory)?;
    let name = input.name.trim().to_string();
    let mut v = Validator::default();
    v.check(name_ok(&name), "name", NAME_RULE);
    let mut targets: Vec<String> = Vec::new();
    for t in &input.targets {
        match parse_address(t) {
            Some(a) if targets.contains(&a) => {
                v.check(false, "targets", &format!("{a} is listed twice"));
            }
            Some(a) => targets.push(a),
            None => {
                v.check(false, "targets", &format!("{:?} {ADDRESS_RULE}", t.trim()));
            }
        }
    }
    v.check(
        input.targets.len() <= MAX_TARGETS,
        "targets",
        "at most 100 addresses",
    );
    let project_ok =
        crate::access::exists(store, "projects", p.tenant_id(), &input.project_id).await?;
    v.check(
        project_ok,
        "project_id",
        "no such project in your organization",
    );
    v.finish()?;
    if input.public && !is_admin(p) {
        return Err(ApiError(AppError::Forbidden));
    }
    let projects = Rights::load(store, p, ResourceKind::Project).await?;
    if projects
        .of(&input.project_id, &input.project_id, None)
        .is_none_or(|have| have < Permission::Use)
    {
        return Err(AppError::field(
            "project_id",
            "you need `use` on this project to create an endpoint in it",
        )
        .into());
    }
    let id = new_id();
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    sqlx::query("INSERT INTO endpoints (id, tenant_id, project_id, name, public, owner_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&input.project_id)
        .bind(&name)
        .bind(flag(input.public))
        .bind(p.user_id())
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| {
            unique_violation_as(
                e,
                AppError::Conflict(format!(
                    "name: an endpoint named {name} already exists in your organization"
                )),
            )
        })?;
    for address in &targets {
        sqlx::query("INSERT INTO endpoint_targets (id, tenant_id, endpoint_id, address, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(new_id())
            .bind(p.tenant_id())
            .bind(&id)
            .bind(address)
            .bind(now)
            .execute(&mut *tx.tx)
            .await?;
    }
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "endpoint.create",
        "endpoint",
        &id,
        json!({"name": name, "project_id": input.project_id, "public": input.public, "targets": targets}),
    )
    .await?;
    tx.commit().await?;
    get_endpoint(store, gw, p, &id).await
}

/// Deletes an endpoint the caller may `manage`, with its targets and the routes leading to it.
pub async fn delete_endpoint(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    let e = endpoint_with(store, p, id, Permission::Manage).await?;
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    let routes = sqlx::query(
        "SELECT r.id, g.name AS gateway, r.host, r.path_prefix FROM gateway_routes r JOIN gateways g ON g.id = r.gateway_id
         WHERE r.tenant_id = $1 AND r.endpoint_id = $2 ORDER BY g.name, r.host, r.path_prefix",
    )
    .bind(p.tenant_id())
    .bind(id)
    .fetch_all(&mut *tx.tx)
    .await?
    .iter()
    .map(|r| {
        Ok(json!({
            "id": r.try_get::<String, _>("id")?,
            "gateway": r.try_get::<String, _>("gateway")?,
            "host": r.try_get::<String, _>("host")?,
            "path_prefix": r.try_get::<String, _>("path_prefix")?,
        }))
    })
    .collect::<Result<Vec<_>, sqlx::Error>>()?;
    for table in ["gateway_routes", "endpoint_targets"] {
        sqlx::query(&format!(
            "DELETE FROM {table} WHERE tenant_id = $1 AND endpoint_id = $2"
        ))
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    }
    let tcp_ports =
        super::names::remove_tcp_routes(&mut tx, p.tenant_id(), Owner::Endpoint, id).await?;
    super::names::delete_owned(&mut tx, "endpoints", p.tenant_id(), id).await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "endpoint.delete",
        "endpoint",
        id,
        json!({"name": e.name, "project_id": e.project_id, "routes_removed": routes, "tcp_ports_closed": tcp_ports}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// That the caller may run serving jobs for the endpoint (`manage` on it); else the submit's
/// error at `serve.endpoint_id`, the same whether the endpoint is hidden or only not theirs.
pub async fn check_deploy(store: &Store, p: &Principal, endpoint_id: &str) -> ApiResult<()> {
    match endpoint_with(store, p, endpoint_id, Permission::Manage).await {
        Err(ApiError(AppError::NotFound | AppError::Forbidden)) => Err(AppError::field(
            "serve.endpoint_id",
            "no endpoint you may manage has this id",
        )
        .into()),
        other => other.map(|_| ()),
    }
}

/// Registers an upstream instance of an endpoint the caller may `manage`.
pub async fn add_target(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    endpoint_id: &str,
    input: CreateTarget,
) -> ApiResult<EndpointTarget> {
    let e = endpoint_with(store, p, endpoint_id, Permission::Manage).await?;
    let address =
        parse_address(&input.address).ok_or_else(|| AppError::field("address", ADDRESS_RULE))?;
    let target = EndpointTarget {
        id: new_id(),
        address,
        created_at: 0,
    };
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    sqlx::query("INSERT INTO endpoint_targets (id, tenant_id, endpoint_id, address, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(&target.id)
        .bind(p.tenant_id())
        .bind(endpoint_id)
        .bind(&target.address)
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|err| {
            unique_violation_as(
                err,
                AppError::Conflict(format!(
                    "address: {} is already a target of {}",
                    target.address, e.name
                )),
            )
        })?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "endpoint.target_add",
        "endpoint",
        endpoint_id,
        json!({"name": e.name, "target_id": target.id, "address": target.address}),
    )
    .await?;
    tx.commit().await?;
    Ok(EndpointTarget {
        created_at: now,
        ..target
    })
}

/// Removes an upstream instance of an endpoint the caller may `manage`.
pub async fn remove_target(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    endpoint_id: &str,
    target_id: &str,
) -> ApiResult<()> {
    let e = endpoint_with(store, p, endpoint_id, Permission::Manage).await?;
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    let now = tx.now();
    let address: String = sqlx::query_scalar(
        "SELECT address FROM endpoint_targets WHERE tenant_id = $1 AND endpoint_id = $2 AND id = $3",
    )
    .bind(p.tenant_id())
    .bind(endpoint_id)
    .bind(target_id)
    .fetch_optional(&mut *tx.tx)
    .await?
    .ok_or(AppError::NotFound)?;
    sqlx::query(
        "DELETE FROM endpoint_targets WHERE tenant_id = $1 AND endpoint_id = $2 AND id = $3",
    )
    .bind(p.tenant_id())
    .bind(endpoint_id)
    .bind(target_id)
    .execute(&mut *tx.tx)
    .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "endpoint.target_remove",
        "endpoint",
        endpoint_id,
        json!({"name": e.name, "target_id": target_id, "address": address}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let ok = |s: &str| parse_address(s);
        assert_eq!(ok("10.0.0.7:8000").as_deref(), Some("10.0.0.7:8000"));
        assert_eq!(ok(" Vllm-0.Svc:080 ").as_deref(), Some("vllm-0.svc:80"));
        assert_eq!(ok("my_host:1").as_deref(), Some("my_host:1"));
        assert_eq!(ok("[::1]:65535").as_deref(), Some("[::1]:65535"));
        assert_eq!(ok("[FE80::1]:9").as_deref(), Some("[fe80::1]:9"));
        for bad in [
            "",
            "host",
            "host:",
            ":80",
            "host:0",
            "host:65536",
            "host:+80",
            "http://host:80",
            "host:80/path",
            "ho st:80",
            "-host:80",
            "a..b:80",
            "::1:80",
            "[::1]80",
            "[nope]:80",
            "host:123456",
        ] {
            assert_eq!(ok(bad), None, "{bad:?}");
        }
        assert_eq!(ok(&format!("{}:80", "a".repeat(252))), None);
        assert!(name_ok("llama-3") && !name_ok("") && !name_ok("Llama") && !name_ok("a_b"));
        assert!(name_ok(&"a".repeat(100)) && !name_ok(&"a".repeat(101)));
        assert!(dns_name_ok("api.example.com", false) && !dns_name_ok("a_b.com", false));
    }
}
