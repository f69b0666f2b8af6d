//! What the data path counts per endpoint: requests by status class, time to the upstream's
//! first byte (a Prometheus histogram), bytes sent to clients, requests and streams in
//! flight. Labelled by the endpoint's id (bounded: one series per endpoint row) and name.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Histogram buckets, seconds.
pub const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// One upstream instance as the data path tracks it (by target id).
#[derive(Default)]
pub struct TargetState {
    /// Requests (and streams) in flight to it: the balancer's load.
    pub inflight: AtomicU64,
    /// Its last active probe did not connect (until the first probe: assumed healthy).
    pub down: AtomicBool,
    /// A probe has connected to it at least once (a serving job is taken only then).
    pub seen_up: AtomicBool,
    /// Skipped until this time (store clock, ms) after a failed connection.
    pub ejected_until: AtomicI64,
    pub requests: AtomicU64,
    pub failures: AtomicU64,
}

impl TargetState {
    /// Whether a request may go to it now; a serving job (`job`) only once its port answered.
    pub fn usable(&self, now: i64, job: bool) -> bool {
        !self.down.load(Ordering::Relaxed)
            && (!job || self.seen_up.load(Ordering::Relaxed))
            && self.ejected_until.load(Ordering::Relaxed) <= now
    }
}

#[derive(Default)]
pub struct EndpointStats {
    pub name: Mutex<String>,
    /// By status class: 1xx … 5xx (index 0 … 4).
    pub status: [AtomicU64; 5],
    /// Requests per bucket (not cumulative: see [`EndpointStats::cumulative`]), then +Inf.
    latency: [AtomicU64; BUCKETS.len() + 1],
    pub latency_sum_us: AtomicU64,
    pub bytes_out: AtomicU64,
    pub inflight: AtomicU64,
    /// Tokens the upstream reported in OpenAI-style `usage` (streamed responses too).
    pub prompt_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
}

impl EndpointStats {
    /// Requests at or under each bucket's bound, then all of them (Prometheus' `le` counts).
    pub fn cumulative(&self) -> Vec<u64> {
        let mut total = 0;
        self.latency
            .iter()
            .map(|c| {
                total += c.load(Ordering::Relaxed);
                total
            })
            .collect()
    }

    pub fn observe(&self, status: u16, first_byte: Duration) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.status[class].fetch_add(1, Ordering::Relaxed);
        // One bucket per request (the first whose bound holds; the last: +Inf); summed up when
        // read, so a request costs one increment, not one per bucket.
        let s = first_byte.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|le| s <= *le)
            .unwrap_or(BUCKETS.len());
        self.latency[i].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us
            .fetch_add(first_byte.as_micros() as u64, Ordering::Relaxed);
    }
}

/// Every endpoint's counters, kept for the life of the process.
#[derive(Default)]
pub struct Registry {
    by_endpoint: Mutex<HashMap<String, Arc<EndpointStats>>>,
}

impl Registry {
    pub fn endpoint(&self, id: &str, name: &str) -> Arc<EndpointStats> {
        let mut m = match self.by_endpoint.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let s = m.entry(id.to_string()).or_default().clone();
        if let Ok(mut n) = s.name.lock() {
            if n.as_str() != name {
                *n = name.to_string();
            }
        }
        s
    }

    /// An endpoint's counters, if it has any (reading them adds no series to `/metrics`).
    pub fn get(&self, id: &str) -> Option<Arc<EndpointStats>> {
        let m = match self.by_endpoint.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        m.get(id).cloned()
    }

    /// The counters in Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let m = match self.by_endpoint.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let mut rows: Vec<(&String, &Arc<EndpointStats>)> = m.iter().collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        let label = |id: &str, s: &EndpointStats| {
            let name = s.name.lock().map(|n| n.clone()).unwrap_or_default();
            format!("endpoint_id=\"{id}\",endpoint=\"{}\"", escape(&name))
        };
        let _ = writeln!(out, "# HELP switchyard_gateway_requests_total Requests through the gateways, by endpoint and status class.\n# TYPE switchyard_gateway_requests_total counter");
        for (id, s) in &rows {
            for (i, c) in s.status.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "switchyard_gateway_requests_total{{{},class=\"{}xx\"}} {}",
                    label(id, s),
                    i + 1,
                    c.load(Ordering::Relaxed)
                );
            }
        }
        let _ = writeln!(out, "# HELP switchyard_gateway_upstream_first_byte_seconds Time from the request to the upstream's response headers.\n# TYPE switchyard_gateway_upstream_first_byte_seconds histogram");
        for (id, s) in &rows {
            let l = label(id, s);
            let counts = s.cumulative();
            for (i, le) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "switchyard_gateway_upstream_first_byte_seconds_bucket{{{l},le=\"{le}\"}} {}",
                    counts[i]
                );
            }
            let n = counts[BUCKETS.len()];
            let _ = writeln!(
                out,
                "switchyard_gateway_upstream_first_byte_seconds_bucket{{{l},le=\"+Inf\"}} {n}\nswitchyard_gateway_upstream_first_byte_seconds_sum{{{l}}} {}\nswitchyard_gateway_upstream_first_byte_seconds_count{{{l}}} {n}",
                s.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6
            );
        }
        let _ = writeln!(out, "# HELP switchyard_gateway_bytes_out_total Response bytes sent to clients.\n# TYPE switchyard_gateway_bytes_out_total counter");
        for (id, s) in &rows {
            let _ = writeln!(
                out,
                "switchyard_gateway_bytes_out_total{{{}}} {}",
                label(id, s),
                s.bytes_out.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(out, "# HELP switchyard_gateway_tokens_total Tokens the upstreams reported in OpenAI-style usage, by kind.\n# TYPE switchyard_gateway_tokens_total counter");
        for (id, s) in &rows {
            let l = label(id, s);
            let _ = writeln!(
                out,
                "switchyard_gateway_tokens_total{{{l},kind=\"prompt\"}} {}\nswitchyard_gateway_tokens_total{{{l},kind=\"completion\"}} {}",
                s.prompt_tokens.load(Ordering::Relaxed),
                s.completion_tokens.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(out, "# HELP switchyard_gateway_in_flight Requests and streams in flight.\n# TYPE switchyard_gateway_in_flight gauge");
        for (id, s) in &rows {
            let _ = writeln!(
                out,
                "switchyard_gateway_in_flight{{{}}} {}",
                label(id, s),
                s.inflight.load(Ordering::Relaxed)
            );
        }
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
