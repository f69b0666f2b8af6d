//! Each endpoint's traffic over time. Every [`SAMPLE_EVERY`] the sampler reads the counters of
//! every endpoint of the gateway's snapshot ([`EndpointStats`]) and of its instances
//! ([`super::metrics::TargetState`]) and keeps what changed since the previous sample as one
//! [`Sample`] in a ring of [`KEEP`] per endpoint (the last hour), in memory: a restart starts
//! it again. An endpoint gone from the snapshot is dropped with its ring, so memory stays
//! bounded by the endpoints that exist.
//!
//! `GET /api/v1/endpoints/{id}/metrics` and the endpoint's page read it
//! ([`super::sampler::endpoint_traffic`]):
//! one point per sample for 15 minutes, one per minute for the hour. A point's percentiles of
//! time to first byte are estimated from the histogram's bucket deltas in it (merged over the
//! minute's samples), linearly inside the bucket that holds the rank, as Prometheus'
//! `histogram_quantile` does; a rank above the last bound (30 s) reads as that bound.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use app::model::{quantile_ms, InstancePoint, TrafficPoint, TrafficWindow};

use super::metrics::{EndpointStats, BUCKETS};

/// How often the counters are sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Samples kept per endpoint: an hour of them.
pub const KEEP: usize = 360;
pub(super) const SAMPLE_MS: i64 = SAMPLE_EVERY.as_millis() as i64;
/// The histogram's buckets, then above the last bound.
const SLOTS: usize = BUCKETS.len() + 1;

/// An endpoint's counters as read at one sample (they only grow while the process lives), or
/// what they grew by between two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// By status class: 1xx … 5xx.
    pub by_class: [u64; 5],
    /// Time to first byte: requests per bucket (not cumulative), then above the last bound.
    pub buckets: [u64; SLOTS],
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Totals {
    pub fn read(s: &EndpointStats) -> Totals {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        Totals {
            by_class: std::array::from_fn(|i| load(&s.status[i])),
            buckets: s.buckets(),
            bytes_in: load(&s.bytes_in),
            bytes_out: load(&s.bytes_out),
            prompt_tokens: load(&s.prompt_tokens),
            completion_tokens: load(&s.completion_tokens),
        }
    }

    /// What grew since `before`.
    fn since(&self, before: &Totals) -> Totals {
        Totals {
            by_class: std::array::from_fn(|i| grown(self.by_class[i], before.by_class[i])),
            buckets: std::array::from_fn(|i| grown(self.buckets[i], before.buckets[i])),
            bytes_in: grown(self.bytes_in, before.bytes_in),
            bytes_out: grown(self.bytes_out, before.bytes_out),
            prompt_tokens: grown(self.prompt_tokens, before.prompt_tokens),
            completion_tokens: grown(self.completion_tokens, before.completion_tokens),
        }
    }

    fn add(&mut self, o: &Totals) {
        for (a, b) in self.by_class.iter_mut().zip(o.by_class) {
            *a += b;
        }
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
    }
}

/// A counter's growth; one lower than before started again from zero (its endpoint's or
/// instance's counters were made anew), so all of it is new.
fn grown(now: u64, before: u64) -> u64 {
    now.checked_sub(before).unwrap_or(now)
}

/// What the sampler read of one instance.
#[derive(Clone, Debug)]
pub struct InstanceReading {
    pub target_id: Arc<str>,
    pub address: Arc<str>,
    /// Since the process started.
    pub requests: u64,
    pub failures: u64,
    pub in_flight: u64,
    pub healthy: bool,
    /// Distinct sessions since the previous sample (the sketch is cleared when read).
    pub sessions: u64,
}

/// What the sampler read of one endpoint.
#[derive(Clone, Debug)]
pub struct Reading {
    pub endpoint_id: String,
    pub totals: Totals,
    pub in_flight: u64,
    pub instances: Vec<InstanceReading>,
}

/// One instance in one sample: `requests` and `failures` are those since the previous one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSample {
    pub target_id: Arc<str>,
    pub address: Arc<str>,
    pub requests: u64,
    pub failures: u64,
    pub in_flight: u64,
    pub healthy: bool,
    pub sessions: u64,
}

/// What an endpoint served between two samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When it was taken (store clock, ms).
    pub at: i64,
    /// Since the previous sample, ms (the sampling interval for an endpoint's first).
    pub span_ms: i64,
    pub delta: Totals,
    pub in_flight: u64,
    pub instances: Vec<InstanceSample>,
}

/// One endpoint's ring and the totals its next sample is taken against.
#[derive(Default)]
struct Track {
    last: Totals,
    last_at: Option<i64>,
    /// (requests, failures) per instance at the last sample.
    instances: HashMap<Arc<str>, (u64, u64)>,
    ring: VecDeque<Sample>,
}

/// Every endpoint's recent samples.
#[derive(Default)]
pub struct Series {
    tracks: Mutex<HashMap<String, Track>>,
}

impl Series {
    fn tracks(&self) -> std::sync::MutexGuard<'_, HashMap<String, Track>> {
        match self.tracks.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Takes one sample of every endpoint read at `now`; endpoints not among them are gone
    /// and dropped. An endpoint's first sample counts its counters from zero (they were made
    /// with the endpoint).
    pub fn record(&self, now: i64, readings: Vec<Reading>) {
        let mut tracks = self.tracks();
        let present: HashSet<&str> = readings.iter().map(|r| r.endpoint_id.as_str()).collect();
        tracks.retain(|id, _| present.contains(id.as_str()));
        for r in readings {
            let t = tracks.entry(r.endpoint_id).or_default();
            let span_ms = match t.last_at {
                Some(at) if now > at => now - at,
                _ => SAMPLE_MS,
            };
            let instances = r
                .instances
                .iter()
                .map(|i| {
                    let (requests, failures) =
                        t.instances.get(&i.target_id).copied().unwrap_or_default();
                    InstanceSample {
                        target_id: i.target_id.clone(),
                        address: i.address.clone(),
                        requests: grown(i.requests, requests),
                        failures: grown(i.failures, failures),
                        in_flight: i.in_flight,
                        healthy: i.healthy,
                        sessions: i.sessions,
                    }
                })
                .collect();
            t.ring.push_back(Sample {
                at: now,
                span_ms,
                delta: r.totals.since(&t.last),
                in_flight: r.in_flight,
                instances,
            });
            while t.ring.len() > KEEP {
                t.ring.pop_front();
            }
            t.last = r.totals;
            t.last_at = Some(now);
            t.instances = r
                .instances
                .into_iter()
                .map(|i| (i.target_id, (i.requests, i.failures)))
                .collect();
        }
    }

    /// The endpoint's points over `window` as of `now`, oldest first (none before its first
    /// sample).
    pub fn traffic(&self, endpoint_id: &str, window: TrafficWindow, now: i64) -> Vec<TrafficPoint> {
        let tracks = self.tracks();
        let Some(t) = tracks.get(endpoint_id) else {
            return Vec::new();
        };
        let from = now - window.span_ms();
        let samples: Vec<&Sample> = t.ring.iter().filter(|s| s.at > from).collect();
        match window.step_ms() {
            None => samples
                .iter()
                .map(|s| point(std::slice::from_ref(s)))
                .collect(),
            Some(step) => samples
                .chunk_by(|a, b| a.at.div_euclid(step) == b.at.div_euclid(step))
                .map(point)
                .collect(),
        }
    }

    /// How many samples the endpoint has (for tests: the ring stays bounded).
    pub fn len(&self, endpoint_id: &str) -> usize {
        self.tracks().get(endpoint_id).map_or(0, |t| t.ring.len())
    }
}

/// One point of consecutive samples: counters summed, the percentiles of their merged
/// histogram, in flight and health as at the last, each instance's busiest sample's sessions.
fn point(samples: &[&Sample]) -> TrafficPoint {
    let mut d = Totals::default();
    let mut span_ms = 0;
    let mut instances: Vec<InstancePoint> = Vec::new();
    for s in samples {
        d.add(&s.delta);
        span_ms += s.span_ms;
        for i in &s.instances {
            let at = match instances.iter().position(|x| *x.target_id == *i.target_id) {
                Some(at) => at,
                None => {
                    instances.push(InstancePoint {
                        target_id: i.target_id.to_string(),
                        address: i.address.to_string(),
                        ..Default::default()
                    });
                    instances.len() - 1
                }
            };
            let x = &mut instances[at];
            x.requests += i.requests;
            x.failures += i.failures;
            x.in_flight = i.in_flight;
            x.healthy = i.healthy;
            x.sessions = x.sessions.max(i.sessions);
        }
    }
    instances.sort_by(|a, b| a.address.cmp(&b.address));
    let requests: u64 = d.by_class.iter().sum();
    let bounds_ms: Vec<u64> = BUCKETS
        .iter()
        .map(|s| (s * 1000.0).round() as u64)
        .collect();
    let cumulative: Vec<u64> = d
        .buckets
        .iter()
        .scan(0, |total, n| {
            *total += n;
            Some(*total)
        })
        .collect();
    let ttfb = |q: f64| {
        quantile_ms(q, &bounds_ms, &cumulative).map(|(ms, _)| (ms * 1000.0).round() / 1000.0)
    };
    TrafficPoint {
        at: samples.last().map_or(0, |s| s.at),
        span_ms,
        requests,
        by_class: d.by_class,
        error_rate: if requests == 0 {
            0.0
        } else {
            d.by_class[4] as f64 / requests as f64
        },
        ttfb_p50_ms: ttfb(0.5),
        ttfb_p95_ms: ttfb(0.95),
        ttfb_p99_ms: ttfb(0.99),
        bytes_in: d.bytes_in,
        bytes_out: d.bytes_out,
        in_flight: samples.last().map_or(0, |s| s.in_flight),
        prompt_tokens: d.prompt_tokens,
        completion_tokens: d.completion_tokens,
        instances,
    }
}

#[cfg(test)]
mod tests;
