//! Raw TCP routes: a listener port of its own on one of the tenant's gateways, forwarded to
//! an endpoint's instances, open only to the listed source networks.

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// A raw TCP route.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TcpRoute {
    pub id: String,
    pub gateway_id: String,
    pub endpoint_id: String,
    /// The port clients connect to (from the server's `gateway_tcp_ports`).
    pub port: i64,
    /// The gateway's certificate terminates TLS before the bytes are forwarded.
    pub tls: bool,
    /// The networks (CIDR) that may connect; every other address is refused.
    pub allowed_sources: Vec<String>,
    /// With TLS: the certificate authorities (PEM) a client's certificate must chain to; a
    /// client without one is refused in the handshake. `None`: no client certificate asked.
    pub client_ca: Option<String>,
    /// `host:port` clients connect to.
    pub address: String,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTcpRoute {
    pub gateway_id: String,
    pub endpoint_id: String,
    #[serde(default)]
    pub tls: bool,
    /// At least one network, such as `10.0.0.0/8` (`0.0.0.0/0` and `::/0`: any address).
    pub allowed_sources: Vec<String>,
    /// With `tls`: ask each client for a certificate issued by one of these certificate
    /// authorities (PEM, one or more certificates).
    #[serde(default)]
    pub client_ca: Option<String>,
}

/// Switch the endpoint or the allowed networks; open connections are left alone.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateTcpRoute {
    pub endpoint_id: Option<String>,
    pub allowed_sources: Option<Vec<String>>,
    /// New certificate authorities for client certificates (a route with TLS); `""` stops
    /// asking for one. The port's listener restarts with them: open connections finish.
    pub client_ca: Option<String>,
}
