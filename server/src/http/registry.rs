//! Request metrics in Prometheus text format, without a metrics framework: a few counters and
//! one latency histogram, plus store-derived gauges computed at scrape time.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

const BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Default)]
struct Series {
    count: u64,
    sum: f64,
    buckets: [u64; BUCKETS.len()],
}

#[derive(Default)]
pub struct Metrics {
    // (method, route, status) -> series
    requests: Mutex<BTreeMap<(String, String, u16), Series>>,
}

impl Metrics {
    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let Ok(mut map) = self.requests.lock() else {
            return;
        };
        let s = map
            .entry((method.to_string(), route.to_string(), status))
            .or_default();
        s.count += 1;
        s.sum += seconds;
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                s.buckets[i] += 1;
            }
        }
    }

    /// Renders the request series followed by `gauges` (name, help, value).
    pub fn render(&self, gauges: &[(&str, &str, i64)]) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP switchyard_http_requests_total HTTP requests served."
        );
        let _ = writeln!(out, "# TYPE switchyard_http_requests_total counter");
        let map = match self.requests.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        for ((method, route, status), s) in map.iter() {
            let _ = writeln!(
                out,
                "switchyard_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {}",
                escape(route),
                s.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP switchyard_http_request_duration_seconds Time to answer HTTP requests."
        );
        let _ = writeln!(
            out,
            "# TYPE switchyard_http_request_duration_seconds histogram"
        );
        // Aggregate over status for the histogram.
        let mut hist: BTreeMap<(&str, &str), (u64, f64, [u64; BUCKETS.len()])> = BTreeMap::new();
        for ((method, route, _), s) in map.iter() {
            let e = hist
                .entry((method, route))
                .or_insert((0, 0.0, [0; BUCKETS.len()]));
            e.0 += s.count;
            e.1 += s.sum;
            for i in 0..BUCKETS.len() {
                e.2[i] += s.buckets[i];
            }
        }
        for ((method, route), (count, sum, buckets)) in hist {
            let labels = format!("method=\"{method}\",route=\"{}\"", escape(route));
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "switchyard_http_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {}",
                    buckets[i]
                );
            }
            let _ = writeln!(
                out,
                "switchyard_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {count}"
            );
            let _ = writeln!(
                out,
                "switchyard_http_request_duration_seconds_sum{{{labels}}} {sum}"
            );
            let _ = writeln!(
                out,
                "switchyard_http_request_duration_seconds_count{{{labels}}} {count}"
            );
        }
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {value}");
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.observe("GET", "/api/v1/users", 200, 0.003);
        m.observe("GET", "/api/v1/users", 200, 0.2);
        m.observe("GET", "/api/v1/users", 404, 0.001);
        let text = m.render(&[("switchyard_tenants", "Tenants.", 3)]);
        assert!(text.contains("switchyard_http_requests_total{method=\"GET\",route=\"/api/v1/users\",status=\"200\"} 2"));
        assert!(text.contains("status=\"404\"} 1"));
        assert!(text.contains("route=\"/api/v1/users\",le=\"0.005\"} 2"));
        assert!(text.contains("route=\"/api/v1/users\",le=\"+Inf\"} 3"));
        assert!(text.contains("switchyard_tenants 3"));
    }
}
