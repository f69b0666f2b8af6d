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
    /// What its listener presents.
    pub certificate: CertificateSource,
    /// The base URL its routes are reached under.
    pub url: String,
    pub created_at: i64,
}

/// Where a gateway's TLS certificate comes from.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CertificateSource {
    /// The operator's files in `gateway_tls_dir`.
    Operator,
    /// Made by the server at start (development): clients must be told to trust it.
    SelfSigned,
    /// The operator's files are there but cannot be used (one missing or unreadable, not
    /// PEM, or a key that is not the certificate's): the gateway does not listen until the
    /// operator fixes them.
    Unusable,
    /// Plain HTTP (`gateway_plain_http`).
    None,
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
    /// Raw TCP routes (created through `/api/v1/tcp-routes`).
    pub tcp_routes: Vec<TcpRoute>,
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

// ---- traffic over time (`GET /api/v1/endpoints/{id}/metrics`) -----------------------------

/// How far back an endpoint's traffic reaches, and how finely it is cut.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub enum TrafficWindow {
    /// The last 15 minutes, one point per 10-second sample.
    #[serde(rename = "15m")]
    Minutes15,
    /// The last hour, one point per minute.
    #[default]
    #[serde(rename = "1h")]
    Hour,
}

impl TrafficWindow {
    pub const ALL: [TrafficWindow; 2] = [TrafficWindow::Minutes15, TrafficWindow::Hour];

    /// `15m` or `1h`; nothing (or an empty value) is the hour.
    pub fn parse(value: Option<&str>) -> Result<TrafficWindow, crate::error::AppError> {
        match value.map(str::trim).unwrap_or("") {
            "" | "1h" => Ok(TrafficWindow::Hour),
            "15m" => Ok(TrafficWindow::Minutes15),
            _ => Err(crate::error::AppError::field("window", "must be 15m or 1h")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TrafficWindow::Minutes15 => "15m",
            TrafficWindow::Hour => "1h",
        }
    }

    /// What the page calls it.
    pub fn label(self) -> &'static str {
        match self {
            TrafficWindow::Minutes15 => "Last 15 minutes",
            TrafficWindow::Hour => "Last hour",
        }
    }

    /// How far back it reaches, ms.
    pub fn span_ms(self) -> i64 {
        match self {
            TrafficWindow::Minutes15 => 15 * 60_000,
            TrafficWindow::Hour => 60 * 60_000,
        }
    }

    /// How much time one point gathers, ms (`None`: one point per sample).
    pub fn step_ms(self) -> Option<i64> {
        match self {
            TrafficWindow::Minutes15 => None,
            TrafficWindow::Hour => Some(60_000),
        }
    }
}

/// An endpoint's traffic over a window, from the gateway's samples of its counters (every
/// 10 s, the last hour kept in memory: a restart starts it again).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct EndpointTraffic {
    pub endpoint_id: String,
    pub window: TrafficWindow,
    /// How often the gateway samples, ms.
    pub sample_ms: i64,
    /// When this was read (server clock, ms).
    pub now: i64,
    /// Oldest first: one per sample (`15m`) or per minute with samples (`1h`).
    pub points: Vec<TrafficPoint>,
}

impl EndpointTraffic {
    /// Whether any request was counted in the window.
    pub fn is_quiet(&self) -> bool {
        self.points
            .iter()
            .all(|p| p.requests == 0 && p.in_flight == 0)
    }
}

/// What an endpoint served in one interval.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TrafficPoint {
    /// The interval's end: the time of its last sample, ms.
    pub at: i64,
    /// How long the interval is, ms (requests per minute: `requests * 60000 / span_ms`).
    pub span_ms: i64,
    /// Requests answered (refused ones included).
    pub requests: u64,
    /// By status class: 1xx … 5xx (index 0 … 4).
    pub by_class: [u64; 5],
    /// The share of requests answered 5xx (0 to 1; 0 without requests).
    pub error_rate: f64,
    /// Time to the upstream's first byte, estimated from the histogram's buckets (linear
    /// inside the bucket that holds the rank; at or above the last bound, 30 000, it reads as
    /// that bound). `None` without requests.
    pub ttfb_p50_ms: Option<f64>,
    pub ttfb_p95_ms: Option<f64>,
    pub ttfb_p99_ms: Option<f64>,
    /// Request body bytes received from clients.
    pub bytes_in: u64,
    /// Response bytes sent to clients.
    pub bytes_out: u64,
    /// Requests and streams in flight at the interval's last sample.
    pub in_flight: u64,
    /// Tokens the upstream reported in OpenAI-style `usage`.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Each instance in the interval, by address.
    pub instances: Vec<InstancePoint>,
}

impl TrafficPoint {
    /// `count` of this interval's requests as a rate per minute.
    pub fn per_minute(&self, count: u64) -> f64 {
        if self.span_ms <= 0 {
            return 0.0;
        }
        count as f64 * 60_000.0 / self.span_ms as f64
    }
}

/// What one instance served in an interval.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct InstancePoint {
    pub target_id: String,
    /// `host:port`.
    pub address: String,
    /// Requests sent to it.
    pub requests: u64,
    /// Of those, the ones it did not answer (connection refused or failed, timed out).
    pub failures: u64,
    /// In flight to it at the interval's last sample.
    pub in_flight: u64,
    /// Whether the balancer could send it requests at the interval's last sample.
    pub healthy: bool,
    /// Distinct session keys sent to it in a 10-second sample (approximate, within a few
    /// percent; for a minute, its busiest sample). Requests without a session key do not
    /// count.
    pub sessions: u64,
}

/// The `q` quantile (0 < q ≤ 1) of a cumulative histogram, in milliseconds, as Prometheus'
/// `histogram_quantile` estimates it: linear inside the bucket that holds it (the first from
/// 0). `None` without observations; `Some((bound, true))` when it lies above the last bound.
pub fn quantile_ms(q: f64, bounds_ms: &[u64], cumulative: &[u64]) -> Option<(f64, bool)> {
    let total = *cumulative.last()?;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut below = 0u64;
    let mut lower = 0f64;
    for (bound, &count) in bounds_ms.iter().zip(cumulative) {
        let upper = *bound as f64;
        if count as f64 >= rank {
            let inside = count - below;
            if inside == 0 {
                return Some((upper, false));
            }
            let at = lower + (upper - lower) * (rank - below as f64) / inside as f64;
            return Some((at, false));
        }
        below = count;
        lower = upper;
    }
    bounds_ms.last().map(|b| (*b as f64, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [u64; 4] = [5, 10, 25, 50];

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        // 10 requests: 4 under 5 ms, 4 more under 10 ms, 2 under 50 ms.
        let c = [4, 8, 8, 10, 10];
        assert_eq!(quantile_ms(0.5, &BOUNDS, &c), Some((6.25, false)));
        assert_eq!(quantile_ms(0.4, &BOUNDS, &c), Some((5.0, false)));
        assert_eq!(quantile_ms(0.95, &BOUNDS, &c), Some((43.75, false)));
        assert_eq!(quantile_ms(0.2, &BOUNDS, &c), Some((2.5, false)));
        // Beyond the last bound: that bound, marked.
        assert_eq!(
            quantile_ms(0.95, &BOUNDS, &[0, 0, 0, 1, 10]),
            Some((50.0, true))
        );
        assert_eq!(quantile_ms(0.5, &BOUNDS, &[0, 0, 0, 0, 0]), None);
        assert_eq!(quantile_ms(0.5, &BOUNDS, &[]), None);
    }

    #[test]
    fn a_window_is_15m_or_1h() {
        assert_eq!(TrafficWindow::parse(None), Ok(TrafficWindow::Hour));
        assert_eq!(
            TrafficWindow::parse(Some("15m")),
            Ok(TrafficWindow::Minutes15)
        );
        assert_eq!(TrafficWindow::parse(Some(" 1h ")), Ok(TrafficWindow::Hour));
        let e = TrafficWindow::parse(Some("1d")).unwrap_err();
        assert_eq!(
            e.message_for("window").as_deref(),
            Some("must be 15m or 1h")
        );
        for w in TrafficWindow::ALL {
            assert_eq!(TrafficWindow::parse(Some(w.as_str())), Ok(w));
            let json = serde_json::to_string(&w).unwrap();
            assert_eq!(json, format!("\"{}\"", w.as_str()));
        }
    }
}
