//! What the data path counts per endpoint: requests by status class, time to the upstream's
//! first byte (a Prometheus histogram), bytes received from and sent to clients, requests and
//! streams in flight. Labelled by the endpoint's id (bounded: one series per endpoint row) and
//! name. Per instance: requests, failures, in flight and the distinct sessions sent to it
//! ([`Sessions`]). The [`super::sampler`] turns them into time series every 10 s. A request
//! or stream holds its place in flight through an [`Inflight`]. Per raw TCP route
//! ([`TcpStats`]): connections accepted, refused and failed, open, and bytes both ways.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
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
    /// The session keys of the requests sent to it since the sampler last read them.
    pub sessions: Sessions,
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
    /// Request body bytes received from clients (and passed on upstream).
    pub bytes_in: AtomicU64,
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

    /// Requests per bucket, then above the last bound (not cumulative).
    pub fn buckets(&self) -> [u64; BUCKETS.len() + 1] {
        std::array::from_fn(|i| self.latency[i].load(Ordering::Relaxed))
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

/// The counters' map, also after a thread panicked holding it (counters stay usable).
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every endpoint's counters, kept for the life of the process.
#[derive(Default)]
pub struct Registry {
    by_endpoint: Mutex<HashMap<String, Arc<EndpointStats>>>,
}

impl Registry {
    pub fn endpoint(&self, id: &str, name: &str) -> Arc<EndpointStats> {
        let mut m = locked(&self.by_endpoint);
        let s = m.entry(id.to_string()).or_default().clone();
        if let Ok(mut n) = s.name.lock() {
            if n.as_str() != name {
                *n = name.to_string();
            }
        }
        s
    }

    /// Forgets the counters of endpoints `keep` no longer names (deleted ones), so that their
    /// series leave `/metrics`.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut m = locked(&self.by_endpoint);
        m.retain(|id, _| keep(id));
    }

    /// An endpoint's counters, if it has any (reading them adds no series to `/metrics`).
    pub fn get(&self, id: &str) -> Option<Arc<EndpointStats>> {
        let m = locked(&self.by_endpoint);
        m.get(id).cloned()
    }

    /// The counters in Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let m = locked(&self.by_endpoint);
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
        let _ = writeln!(out, "# HELP switchyard_gateway_bytes_in_total Request body bytes received from clients.\n# TYPE switchyard_gateway_bytes_in_total counter");
        for (id, s) in &rows {
            let _ = writeln!(
                out,
                "switchyard_gateway_bytes_in_total{{{}}} {}",
                label(id, s),
                s.bytes_in.load(Ordering::Relaxed)
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

/// Registers of [`Sessions`]: 2^8, so an estimate is within about 6.5 % (1.04 / √256).
const SESSION_BITS: u32 = 8;

/// The distinct session keys seen, approximately: a HyperLogLog of 256 one-byte registers
/// (256 bytes per instance, one `fetch_max` per request, whatever the number of sessions).
/// The hash's top 8 bits pick a register, which keeps the longest run of leading zeros seen in
/// the rest. Small counts use linear counting (exact enough: 3 sessions read as 3 unless two
/// share a register). The sampler reads and clears it every interval ([`Sessions::take`]).
pub struct Sessions {
    registers: [AtomicU8; 1 << SESSION_BITS],
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            registers: std::array::from_fn(|_| AtomicU8::new(0)),
        }
    }
}

impl Sessions {
    /// Counts a session by its key's hash (a well-mixed 64-bit hash: `affinity::key_hash`).
    pub fn add(&self, hash: u64) {
        let i = (hash >> (64 - SESSION_BITS)) as usize;
        // The sentinel bit caps the run at the bits left: the rank is 1 to 57.
        let rank = ((hash << SESSION_BITS) | (1 << (SESSION_BITS - 1))).leading_zeros() + 1;
        self.registers[i].fetch_max(rank as u8, Ordering::Relaxed);
    }

    /// The distinct sessions counted since the last call, and starts again from none (a key
    /// added while this reads lands in this interval or the next).
    pub fn take(&self) -> u64 {
        let registers: Vec<u8> = self
            .registers
            .iter()
            .map(|r| r.swap(0, Ordering::Relaxed))
            .collect();
        hyperloglog_estimate(&registers)
    }
}

/// HyperLogLog's estimate (Flajolet et al. 2007) with its small-range correction: linear
/// counting over the empty registers while the raw estimate is under 2.5 m. 64-bit hashes need
/// no large-range correction.
fn hyperloglog_estimate(registers: &[u8]) -> u64 {
    if registers.is_empty() {
        return 0;
    }
    let m = registers.len() as f64;
    let alpha = 0.7213 / (1.0 + 1.079 / m);
    let sum: f64 = registers.iter().map(|&r| 2f64.powi(-i32::from(r))).sum();
    let raw = alpha * m * m / sum;
    let empty = registers.iter().filter(|&&r| r == 0).count();
    let estimate = if raw <= 2.5 * m && empty > 0 {
        m * (m / empty as f64).ln()
    } else {
        raw
    };
    estimate.round() as u64
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A route's counters for `/metrics` (by route id, kept for the life of the process).
#[derive(Default)]
pub struct TcpStats {
    pub port: AtomicU64,
    pub connections: AtomicU64,
    pub refused: AtomicU64,
    pub active: AtomicU64,
    /// Client to instance, and back.
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Connections no instance took.
    pub failed: AtomicU64,
}

/// Every TCP route's counters.
#[derive(Default)]
pub struct TcpRegistry {
    by_route: Mutex<HashMap<String, Arc<TcpStats>>>,
}

impl TcpRegistry {
    pub fn route(&self, id: &str, port: u16) -> Arc<TcpStats> {
        let mut m = locked(&self.by_route);
        let s = m.entry(id.to_string()).or_default().clone();
        s.port.store(u64::from(port), Ordering::Relaxed);
        s
    }

    /// Forgets the counters of TCP routes `keep` no longer names (deleted ones).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut m = locked(&self.by_route);
        m.retain(|id, _| keep(id));
    }

    /// The counters in Prometheus text format (one series per route row: bounded).
    pub fn render(&self, out: &mut String) {
        let m = locked(&self.by_route);
        let mut rows: Vec<_> = m.iter().collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        type Read = fn(&TcpStats) -> u64;
        let series: [(&str, &str, &str, Read); 6] = [
            (
                "switchyard_gateway_tcp_connections_total",
                "counter",
                "Connections accepted by raw TCP routes.",
                |s| s.connections.load(Ordering::Relaxed),
            ),
            (
                "switchyard_gateway_tcp_refused_total",
                "counter",
                "Connections closed because their source is not allowed or their TLS handshake failed (without a client certificate the route asks for, say).",
                |s| s.refused.load(Ordering::Relaxed),
            ),
            (
                "switchyard_gateway_tcp_failed_total",
                "counter",
                "Connections no instance took.",
                |s| s.failed.load(Ordering::Relaxed),
            ),
            (
                "switchyard_gateway_tcp_active",
                "gauge",
                "Open connections.",
                |s| s.active.load(Ordering::Relaxed),
            ),
            (
                "switchyard_gateway_tcp_bytes_in_total",
                "counter",
                "Bytes from clients to instances.",
                |s| s.bytes_in.load(Ordering::Relaxed),
            ),
            (
                "switchyard_gateway_tcp_bytes_out_total",
                "counter",
                "Bytes from instances to clients.",
                |s| s.bytes_out.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, read) in series {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (id, s) in &rows {
                let port = s.port.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "{name}{{route_id=\"{id}\",port=\"{port}\"}} {}",
                    read(s)
                );
            }
        }
    }
}

/// Counts a request in flight to its endpoint and instance until its response body ends
/// (or is dropped: the client went away).
pub struct Inflight {
    pub endpoint: Arc<EndpointStats>,
    pub target: Option<Arc<TargetState>>,
}

impl Drop for Inflight {
    fn drop(&mut self) {
        self.endpoint.inflight.fetch_sub(1, Ordering::Relaxed);
        if let Some(t) = &self.target {
            t.inflight.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::affinity::key_hash;

    #[test]
    fn sessions_are_counted_once_each_and_cleared_when_read() {
        let s = Sessions::default();
        assert_eq!(s.take(), 0, "no session yet");
        for _ in 0..50 {
            for k in ["alice", "bob", "carol"] {
                s.add(key_hash(k.as_bytes()));
            }
        }
        assert_eq!(s.take(), 3, "fifty requests of three sessions");
        assert_eq!(s.take(), 0, "read: the next interval starts from none");
    }

    #[test]
    fn many_sessions_are_estimated_within_a_few_percent() {
        for n in [200u64, 1_000, 20_000, 200_000] {
            let s = Sessions::default();
            for i in 0..n {
                s.add(key_hash(format!("session-{i}").as_bytes()));
                s.add(key_hash(format!("session-{i}").as_bytes()));
            }
            let got = s.take() as f64;
            let error = (got - n as f64).abs() / n as f64;
            assert!(error < 0.15, "{n} sessions read as {got}");
        }
    }

    #[test]
    fn bytes_in_are_rendered_for_prometheus() {
        let r = Registry::default();
        let s = r.endpoint("e1", "llama");
        s.bytes_in.fetch_add(1234, Ordering::Relaxed);
        let mut out = String::new();
        r.render(&mut out);
        assert!(
            out.contains(
                "switchyard_gateway_bytes_in_total{endpoint_id=\"e1\",endpoint=\"llama\"} 1234"
            ),
            "{out}"
        );
        assert!(out.contains("# TYPE switchyard_gateway_bytes_in_total counter"));
    }
}
