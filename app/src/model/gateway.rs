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
