//! The sampler of the endpoints' traffic: every [`SAMPLE_EVERY`] it reads each endpoint's and
//! instance's counters from the current snapshot into [`super::series::Series`]; and the read
//! of one endpoint's traffic for the API and the page.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::task::JoinHandle;

use app::model::{EndpointTraffic, Principal, TrafficWindow};

use super::series::{InstanceReading, Reading, Totals, SAMPLE_EVERY, SAMPLE_MS};
use super::shared::Gateways;
use crate::config::GatewayConfig;
use crate::http::error::ApiResult;
use crate::store::Store;

impl Gateways {
    /// Samples every endpoint's counters now (the sampler does every [`SAMPLE_EVERY`]; tests
    /// call it to take one at once). Without the configuration (the store unreachable) no
    /// sample is taken and no endpoint dropped.
    pub async fn sample_now(&self) {
        let snap = match self.current().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "gateway: no traffic sample: its configuration could not be read");
                return;
            }
        };
        let now = self.store.now();
        let readings = snap
            .endpoints
            .values()
            .map(|e| Reading {
                endpoint_id: e.id.clone(),
                totals: Totals::read(&e.stats),
                in_flight: e.stats.inflight.load(Ordering::Relaxed),
                instances: e
                    .targets
                    .iter()
                    .map(|t| InstanceReading {
                        target_id: t.id.as_str().into(),
                        address: t.address.as_str().into(),
                        requests: t.state.requests.load(Ordering::Relaxed),
                        failures: t.state.failures.load(Ordering::Relaxed),
                        in_flight: t.state.inflight.load(Ordering::Relaxed),
                        healthy: t.authority.is_some() && t.state.usable(now, t.job),
                        sessions: t.state.sessions.take(),
                    })
                    .collect(),
            })
            .collect();
        self.series.record(now, readings);
    }
}

/// Starts the sampler: a sample every [`SAMPLE_EVERY`], the first at once.
pub fn spawn(g: Arc<Gateways>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(SAMPLE_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            g.sample_now().await;
        }
    })
}

/// An endpoint's traffic over `window`: 404 when the caller may not see the endpoint (as
/// `GET /api/v1/endpoints/{id}`).
pub async fn endpoint_traffic(
    store: &Store,
    gw: &GatewayConfig,
    g: &Gateways,
    p: &Principal,
    id: &str,
    window: TrafficWindow,
) -> ApiResult<EndpointTraffic> {
    super::endpoints::get_endpoint(store, gw, p, id).await?;
    let now = store.now();
    Ok(EndpointTraffic {
        endpoint_id: id.to_string(),
        window,
        sample_ms: SAMPLE_MS,
        now,
        points: g.series.traffic(id, window, now),
    })
}
