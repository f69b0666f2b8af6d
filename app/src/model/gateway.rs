//! The gateway's resources: endpoints and their instances, gateways (namespace-scoped
//! instances with their own listener and tokens), routes and gateway tokens.

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

/// A named service of a project, called through the gateways' routes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Endpoint {
    pub id: String,
    pub project_id: String,
    pub name: String,
    /// Callable without a token (a tenant admin's choice).
    pub public: bool,
    pub owner_id: Option<String>,
    /// The upstream instances (registered addresses).
    pub targets: Vec<EndpointTarget>,
    /// Where it is published: one URL per route.
    pub urls: Vec<String>,
    pub created_at: i64,
}

/// One upstream instance of an endpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct EndpointTarget {
    pub id: String,
    /// `host:port`.
    pub address: String,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateEndpoint {
    pub project_id: String,
    pub name: String,
    /// Only a tenant admin may make an endpoint public.
    #[serde(default)]
    pub public: bool,
    /// Upstream addresses (`host:port`) to start with.
    #[serde(default)]
    pub targets: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTarget {
    pub address: String,
}

/// A namespace-scoped gateway instance (prod, dev, ...): its own listener and tokens.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Gateway {
    pub id: String,
    pub name: String,
    pub port: i64,
    /// The base URL its routes are reached under.
    pub url: String,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateGateway {
    pub name: String,
}

/// A stable host and/or path prefix on a gateway that leads to an endpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct GatewayRoute {
    pub id: String,
    pub gateway_id: String,
    /// Empty: any host.
    pub host: String,
    pub path_prefix: String,
    pub endpoint_id: String,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateGatewayRoute {
    pub gateway_id: String,
    #[serde(default)]
    pub host: String,
    pub path_prefix: String,
    pub endpoint_id: String,
}

/// Change where a route leads (the URL stays).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateGatewayRoute {
    pub endpoint_id: String,
}

/// A gateway token as listed (never its secret).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct GatewayToken {
    pub id: String,
    /// Whose token it is (its calls carry this user's rights).
    pub user_id: String,
    pub gateway_id: String,
    pub gateway_name: String,
    pub name: String,
    pub kind: GatewayTokenKind,
    pub endpoint_ids: Vec<String>,
    /// The first characters of the secret, to recognise it.
    pub prefix: String,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateGatewayToken {
    pub name: String,
    /// Absent: a user token; present: an endpoint token for these endpoints.
    #[serde(default)]
    pub endpoint_ids: Option<Vec<String>>,
    /// 1 to 365; absent: 90.
    #[serde(default)]
    pub expires_in_days: Option<i64>,
}

/// A token just issued: the secret is in this answer only.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IssuedGatewayToken {
    pub token: String,
    #[serde(flatten)]
    pub info: GatewayToken,
}

// ---- what the console's gateway pages show -------------------------------------------------

/// Where a route publishes an endpoint: the gateway, and the URL clients call.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PublishedRoute {
    pub route: GatewayRoute,
    pub gateway_name: String,
    /// `http://host:port/prefix`: the base URL a client is given.
    pub url: String,
}

/// One upstream instance of an endpoint and what the gateway knows of it now.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct InstanceHealth {
    pub target_id: String,
    pub address: String,
    /// Its last probe connected (true until the first probe).
    pub up: bool,
    /// Skipped for a few seconds after a refused connection.
    pub ejected: bool,
    /// Since the server started.
    pub requests: u64,
    pub failures: u64,
    pub in_flight: u64,
}

impl InstanceHealth {
    /// Whether the balancer sends it requests now.
    pub fn serving(&self) -> bool {
        self.up && !self.ejected
    }
}

/// An endpoint's counters since the server started (those of `/metrics`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndpointCounters {
    /// Requests by status class: 1xx … 5xx (index 0 … 4).
    pub by_class: [u64; 5],
    /// The time-to-first-byte histogram's bucket bounds, milliseconds.
    pub bucket_ms: Vec<u64>,
    /// Cumulative counts per bucket, then the count of all (`+Inf`).
    pub cumulative: Vec<u64>,
    pub bytes_out: u64,
    pub in_flight: u64,
}

/// An endpoint as the endpoints page lists it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndpointSummary {
    pub endpoint: Endpoint,
    pub project_name: String,
    /// What the caller may do with it.
    pub permission: Permission,
    pub routes: Vec<PublishedRoute>,
    /// Instances the balancer sends requests to now.
    pub instances_up: usize,
}

/// The endpoints page: the caller's endpoints, where they may create one, the tenant's
/// gateways (to issue a token for) and the caller's gateway tokens.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndpointsOverview {
    pub endpoints: Vec<EndpointSummary>,
    /// Projects the caller may `use` (create an endpoint in).
    pub projects: Vec<Project>,
    pub gateways: Vec<Gateway>,
    pub tokens: Vec<GatewayToken>,
    /// The queues the caller may submit to: where a serving job of a new endpoint may run.
    pub queues: Vec<Queue>,
    /// The server's time when this was read, ms: a token past its expiry is refused.
    pub now: i64,
}

/// What the new-endpoint form made: the endpoint and, when one was deployed with it, its
/// serving job.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndpointCreated {
    pub endpoint: Endpoint,
    pub job: Option<Job>,
}

/// A job that serves (or served) an endpoint, as its page lists it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServingJob {
    pub id: String,
    pub name: String,
    pub state: JobState,
    /// Who submitted it.
    pub username: String,
    pub queue_name: String,
    pub submitted_at: i64,
}

/// One endpoint's page: its instances' health, counters and routes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndpointDetail {
    pub summary: EndpointSummary,
    pub instances: Vec<InstanceHealth>,
    pub counters: EndpointCounters,
    /// Its serving jobs, the newest first (at most 20).
    pub serving_jobs: Vec<ServingJob>,
}

/// The gateways page (tenant admins): gateways, their routes and the endpoints to lead to.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GatewaysOverview {
    pub gateways: Vec<Gateway>,
    pub routes: Vec<PublishedRoute>,
    /// Every endpoint of the organization: (id, name).
    pub endpoints: Vec<(String, String)>,
}

/// A job that serves an endpoint: while it runs, and once `port` answers on its node, it is
/// one of the endpoint's instances. `PORT` is set in its environment.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Serve {
    pub endpoint_id: String,
    /// 1024 to 65535.
    pub port: i64,
}
