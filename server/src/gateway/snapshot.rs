//! What the data path knows, in memory: every gateway with its routes, every live gateway
//! token (by the hash of its secret), every endpoint with its instances, and what decides
//! who may call an endpoint (users, their groups, the `endpoint` access rules, projects).
//! Read whole from the store after each commit that changes any of it (the store's access
//! generation moves), so a request never reads the database and a revocation or a removal
//! from a group refuses the very next request.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use sqlx::Row;

use app::access::{can, Permission, ResourceKind, Rule, Scope, Subject, Target};
use app::model::GatewayTokenKind;

use super::affinity::{Member, Ring, DEFAULT_BALANCE_FACTOR, DEFAULT_VNODES};
use super::metrics::{EndpointStats, TargetState};
use crate::access::project_chain;
use crate::store::Store;

/// A route of a gateway: requests whose host matches (`""`: any) and whose path starts with
/// the prefix (at a `/` boundary) go to the endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteSnap {
    pub host: String,
    pub prefix: String,
    pub endpoint_id: String,
}

/// A raw TCP route: its port forwards to the endpoint's instances for the listed networks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpRouteSnap {
    pub id: String,
    pub gateway_id: String,
    pub endpoint_id: String,
    pub port: u16,
    pub tls: bool,
    /// With `tls`: the authorities a client's certificate must chain to.
    pub client_ca: Option<String>,
    pub sources: Vec<crate::config::IpNet>,
}

impl TcpRouteSnap {
    /// Whether a client at `ip` may connect.
    pub fn admits(&self, ip: std::net::IpAddr) -> bool {
        self.sources.iter().any(|n| n.contains(ip))
    }
}

#[derive(Clone, Debug)]
pub struct GatewaySnap {
    pub id: String,
    pub tenant_id: String,
    pub tenant_slug: String,
    pub name: String,
    pub port: u16,
    /// Host-specific routes first, then longer prefixes first: the first match wins.
    pub routes: Vec<RouteSnap>,
}

#[derive(Clone)]
pub struct TargetSnap {
    pub id: String,
    pub address: String,
    /// `address` parsed once (`None`: not a valid authority; never picked).
    pub authority: Option<axum::http::uri::Authority>,
    /// A serving job (its id is the job's): taken only once a probe found its port open.
    pub job: bool,
    /// Its load, health and counters (kept across snapshots, by target id).
    pub state: Arc<TargetState>,
}

pub struct EndpointSnap {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    pub public: bool,
    pub owner_id: Option<String>,
    /// The endpoint's project and its ancestors, nearest first.
    pub projects: Vec<String>,
    pub targets: Vec<TargetSnap>,
    /// Over every target (health is applied per request).
    pub ring: Ring,
    /// Its counters (kept across snapshots, by endpoint id).
    pub stats: Arc<EndpointStats>,
}

#[derive(Clone, Debug)]
pub struct TokenSnap {
    pub id: String,
    pub tenant_id: String,
    pub gateway_id: String,
    pub user_id: String,
    pub kind: GatewayTokenKind,
    pub endpoints: HashSet<String>,
    pub expires_at: Option<i64>,
}

#[derive(Clone, Debug, Default)]
pub struct UserSnap {
    pub tenant_id: String,
    pub disabled: bool,
    pub tenant_admin: bool,
    pub groups: Vec<String>,
}

/// The snapshot's maps, looked up several times per request: foldhash (seeded per process)
/// instead of SipHash. Their keys are ids and token digests the server made, not what a
/// client chose.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Default)]
pub struct Snapshot {
    /// The store's access generation this snapshot was read at (or after).
    pub generation: u64,
    pub gateways: FastMap<String, GatewaySnap>,
    pub endpoints: FastMap<String, EndpointSnap>,
    /// By the SHA-256 of the secret; revoked tokens are not here.
    pub tokens: FastMap<String, TokenSnap>,
    pub users: FastMap<String, UserSnap>,
    /// The `endpoint` access rules, by tenant.
    pub rules: FastMap<String, Vec<Rule>>,
    /// The running serving jobs this snapshot counts as instances, by id (sorted).
    pub serving: Vec<String>,
    /// Raw TCP routes of existing gateways, by port.
    pub tcp: FastMap<u16, TcpRouteSnap>,
}

impl EndpointSnap {
    /// The instance for `key`: consistent hashing with bounded load
    /// ([`DEFAULT_BALANCE_FACTOR`]), past the bound only when every other instance is in
    /// `tried` (skipped: tried already, down or ejected).
    pub fn pick(&self, key: u64, tried: &[usize]) -> Option<usize> {
        let inflight = |t: &TargetSnap| t.state.inflight.load(std::sync::atomic::Ordering::Relaxed);
        // On the stack for the usual few instances.
        let mut few = [0u64; 16];
        let many: Vec<u64>;
        let load: &[u64] = if self.targets.len() <= few.len() {
            for (l, t) in few.iter_mut().zip(&self.targets) {
                *l = inflight(t);
            }
            &few[..self.targets.len()]
        } else {
            many = self.targets.iter().map(inflight).collect();
            &many
        };
        self.ring
            .pick(key, load, DEFAULT_BALANCE_FACTOR, tried)
            .or_else(|| self.ring.pick(key, load, f64::INFINITY, tried))
    }
}

impl RouteSnap {
    /// Whether a request for `host` (lowercase, without port) and `path` takes this route.
    pub fn matches(&self, host: &str, path: &str) -> bool {
        if !self.host.is_empty() && self.host != host {
            return false;
        }
        let p = self.prefix.trim_end_matches('/');
        p.is_empty()
            || path == p
            || (path.starts_with(p) && path.as_bytes().get(p.len()) == Some(&b'/'))
    }
}

/// Host-specific routes first, then longer prefixes first.
fn order_routes(routes: &mut [RouteSnap]) {
    routes.sort_by_key(|r| (r.host.is_empty(), std::cmp::Reverse(r.prefix.len())));
}

impl GatewaySnap {
    pub fn route(&self, host: &str, path: &str) -> Option<&RouteSnap> {
        self.routes.iter().find(|r| r.matches(host, path))
    }
}

impl Snapshot {
    /// Whether `user_id` may call the endpoint now: an enabled user of its tenant with `use`
    /// on it (an access rule of one of their groups, ownership, or tenant admin).
    pub fn may_use(&self, user_id: &str, ep: &EndpointSnap) -> bool {
        let Some(u) = self.users.get(user_id) else {
            return false;
        };
        if u.disabled || u.tenant_id != ep.tenant_id {
            return false;
        }
        let subject = Subject {
            user_id,
            groups: &u.groups,
            tenant_admin: u.tenant_admin,
        };
        let target = Target {
            kind: ResourceKind::Endpoint,
            id: &ep.id,
            projects: &ep.projects,
            owner: ep.owner_id.as_deref(),
        };
        let rules = self.rules.get(&ep.tenant_id).map_or(&[][..], |r| &r[..]);
        can(&subject, rules, &target, Permission::Use)
    }

    /// Reads everything the data path needs; `target` and `stats` give the state kept across
    /// snapshots of a target and of an endpoint.
    pub async fn load(
        store: &Store,
        generation: u64,
        target: &(dyn Fn(&str) -> Arc<TargetState> + Sync),
        stats: &(dyn Fn(&str, &str) -> Arc<EndpointStats> + Sync),
    ) -> Result<Snapshot, sqlx::Error> {
        let pool = &store.pool;
        let mut s = Snapshot {
            generation,
            ..Default::default()
        };
        for r in sqlx::query(
            "SELECT g.id, g.tenant_id, t.slug AS tenant_slug, g.name, g.port FROM gateways g JOIN tenants t ON t.id = g.tenant_id",
        )
            .fetch_all(pool)
            .await?
        {
            let id: String = r.try_get("id")?;
            let port: i64 = r.try_get("port")?;
            s.gateways.insert(
                id.clone(),
                GatewaySnap {
                    id,
                    tenant_id: r.try_get("tenant_id")?,
                    tenant_slug: r.try_get("tenant_slug")?,
                    name: r.try_get("name")?,
                    port: u16::try_from(port).unwrap_or(0),
                    routes: Vec::new(),
                },
            );
        }
        for r in
            sqlx::query("SELECT gateway_id, host, path_prefix, endpoint_id FROM gateway_routes")
                .fetch_all(pool)
                .await?
        {
            let gw: String = r.try_get("gateway_id")?;
            if let Some(g) = s.gateways.get_mut(&gw) {
                g.routes.push(RouteSnap {
                    host: r.try_get("host")?,
                    prefix: r.try_get("path_prefix")?,
                    endpoint_id: r.try_get("endpoint_id")?,
                });
            }
        }
        for g in s.gateways.values_mut() {
            order_routes(&mut g.routes);
        }
        for r in sqlx::query(
            "SELECT id, gateway_id, endpoint_id, port, tls, sources, client_ca FROM gateway_tcp_routes",
        )
        .fetch_all(pool)
        .await?
        {
            let gateway_id: String = r.try_get("gateway_id")?;
            let port = u16::try_from(r.try_get::<i64, _>("port")?).unwrap_or(0);
            if port == 0 || !s.gateways.contains_key(&gateway_id) {
                continue;
            }
            let sources: String = r.try_get("sources")?;
            s.tcp.insert(
                port,
                TcpRouteSnap {
                    id: r.try_get("id")?,
                    gateway_id,
                    endpoint_id: r.try_get("endpoint_id")?,
                    port,
                    tls: r.try_get::<i64, _>("tls")? != 0,
                    client_ca: r.try_get("client_ca")?,
                    sources: sources
                        .split(',')
                        .filter_map(crate::config::IpNet::parse)
                        .collect(),
                },
            );
        }

        let mut parents: HashMap<String, BTreeMap<String, Option<String>>> = HashMap::new();
        for r in sqlx::query("SELECT id, tenant_id, parent_id FROM projects")
            .fetch_all(pool)
            .await?
        {
            parents
                .entry(r.try_get("tenant_id")?)
                .or_default()
                .insert(r.try_get("id")?, r.try_get("parent_id")?);
        }
        let mut targets: HashMap<String, Vec<TargetSnap>> = HashMap::new();
        for r in sqlx::query("SELECT id, endpoint_id, address FROM endpoint_targets ORDER BY id")
            .fetch_all(pool)
            .await?
        {
            let id: String = r.try_get("id")?;
            let address: String = r.try_get("address")?;
            targets
                .entry(r.try_get("endpoint_id")?)
                .or_default()
                .push(TargetSnap {
                    authority: address.parse().ok(),
                    state: target(&id),
                    job: false,
                    id,
                    address,
                });
        }
        // Running serving jobs: on a local pool, the port on this host. (Simulated pools run
        // no process, so nothing answers there.)
        for r in sqlx::query(
            "SELECT j.id, j.serve_endpoint_id, j.serve_port FROM jobs j JOIN pools p ON p.id = j.pool_id
             WHERE j.serve_endpoint_id IS NOT NULL AND j.state = 'running' AND p.executor = 'local'
             ORDER BY j.id",
        )
        .fetch_all(pool)
        .await?
        {
            let id: String = r.try_get("id")?;
            let port: i64 = r.try_get("serve_port")?;
            let address = format!("127.0.0.1:{port}");
            s.serving.push(id.clone());
            targets
                .entry(r.try_get("serve_endpoint_id")?)
                .or_default()
                .push(TargetSnap {
                    authority: address.parse().ok(),
                    state: target(&id),
                    job: true,
                    id,
                    address,
                });
        }
        for r in
            sqlx::query("SELECT id, tenant_id, project_id, name, public, owner_id FROM endpoints")
                .fetch_all(pool)
                .await?
        {
            let id: String = r.try_get("id")?;
            let tenant_id: String = r.try_get("tenant_id")?;
            let project: String = r.try_get("project_id")?;
            let name: String = r.try_get("name")?;
            let ep_stats = stats(&id, &name);
            let projects = parents
                .get(&tenant_id)
                .map(|p| project_chain(p, &project))
                .unwrap_or_else(|| vec![project]);
            let targets = targets.remove(&id).unwrap_or_default();
            let members: Vec<Member> = targets
                .iter()
                .map(|t| Member {
                    id: t.id.clone(),
                    healthy: t.authority.is_some(),
                })
                .collect();
            s.endpoints.insert(
                id.clone(),
                EndpointSnap {
                    id,
                    tenant_id,
                    stats: ep_stats,
                    name,
                    public: r.try_get::<i64, _>("public")? != 0,
                    owner_id: r.try_get("owner_id")?,
                    projects,
                    ring: Ring::new(&members, DEFAULT_VNODES),
                    targets,
                },
            );
        }

        for r in sqlx::query(
            "SELECT id, tenant_id, disabled, is_tenant_admin, is_platform_admin FROM users",
        )
        .fetch_all(pool)
        .await?
        {
            s.users.insert(
                r.try_get("id")?,
                UserSnap {
                    tenant_id: r.try_get("tenant_id")?,
                    disabled: r.try_get::<i64, _>("disabled")? != 0,
                    tenant_admin: r.try_get::<i64, _>("is_tenant_admin")? != 0
                        || r.try_get::<i64, _>("is_platform_admin")? != 0,
                    groups: Vec::new(),
                },
            );
        }
        for r in sqlx::query("SELECT user_id, group_id FROM memberships")
            .fetch_all(pool)
            .await?
        {
            let user: String = r.try_get("user_id")?;
            if let Some(u) = s.users.get_mut(&user) {
                u.groups.push(r.try_get("group_id")?);
            }
        }
        for r in sqlx::query(
            "SELECT tenant_id, group_id, permission, resource_id, project_id FROM access_rules WHERE resource_kind = $1",
        )
        .bind(ResourceKind::Endpoint.as_str())
        .fetch_all(pool)
        .await?
        {
            let resource: Option<String> = r.try_get("resource_id")?;
            let project: Option<String> = r.try_get("project_id")?;
            let Some(permission) = Permission::parse(&r.try_get::<String, _>("permission")?)
            else {
                continue;
            };
            s.rules
                .entry(r.try_get("tenant_id")?)
                .or_default()
                .push(Rule {
                    group_id: r.try_get("group_id")?,
                    permission,
                    kind: ResourceKind::Endpoint,
                    scope: Scope::from_ids(resource, project),
                });
        }

        for r in sqlx::query(
            "SELECT id, tenant_id, gateway_id, user_id, kind, endpoint_ids, token_hash, expires_at
             FROM gateway_tokens WHERE revoked_at IS NULL",
        )
        .fetch_all(pool)
        .await?
        {
            let kind: GatewayTokenKind = crate::store::text_enum(&r, "kind")?;
            let endpoints: Vec<String> =
                serde_json::from_str(&r.try_get::<String, _>("endpoint_ids")?)
                    .map_err(|e| crate::store::corrupt("endpoint_ids", e))?;
            s.tokens.insert(
                r.try_get("token_hash")?,
                TokenSnap {
                    id: r.try_get("id")?,
                    tenant_id: r.try_get("tenant_id")?,
                    gateway_id: r.try_get("gateway_id")?,
                    user_id: r.try_get("user_id")?,
                    kind,
                    endpoints: endpoints.into_iter().collect(),
                    expires_at: r.try_get("expires_at")?,
                },
            );
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(host: &str, prefix: &str) -> RouteSnap {
        RouteSnap {
            host: host.into(),
            prefix: prefix.into(),
            endpoint_id: format!("{host}{prefix}"),
        }
    }

    #[test]
    fn a_prefix_matches_at_path_boundaries_only() {
        let r = route("", "/v1/llama");
        assert!(r.matches("any", "/v1/llama"));
        assert!(r.matches("any", "/v1/llama/chat/completions"));
        assert!(!r.matches("any", "/v1/llama2/chat"), "not a boundary");
        assert!(!r.matches("any", "/v1"));
        assert!(route("", "/").matches("x", "/anything"));
        assert!(route("api.example", "/").matches("api.example", "/v1"));
        assert!(!route("api.example", "/").matches("other.example", "/v1"));
    }

    #[test]
    fn host_routes_and_longer_prefixes_win() {
        let mut g = GatewaySnap {
            id: "g".into(),
            tenant_id: "t".into(),
            tenant_slug: "t".into(),
            name: "prod".into(),
            port: 1,
            routes: vec![route("", "/"), route("", "/v1/a"), route("h.example", "/")],
        };
        order_routes(&mut g.routes);
        assert_eq!(g.route("h.example", "/v1/a/x").unwrap().host, "h.example");
        assert_eq!(g.route("x", "/v1/a/x").unwrap().prefix, "/v1/a");
        assert_eq!(g.route("x", "/v2").unwrap().prefix, "/");
    }
}
