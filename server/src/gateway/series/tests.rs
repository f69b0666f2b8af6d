//! The ring and the points made of it: deltas, resets, bounds, windows, percentiles.

use super::*;

const MIN: i64 = 60_000;
/// A minute boundary, so that six samples 10 s apart fill one minute.
const T0: i64 = 1_800_000_000_000 - 1_800_000_000_000 % MIN;

fn totals(ok: u64, failed: u64) -> Totals {
    let mut t = Totals {
        bytes_in: 100 * (ok + failed),
        bytes_out: 1000 * ok,
        prompt_tokens: 3 * ok,
        completion_tokens: ok,
        ..Default::default()
    };
    t.by_class[1] = ok;
    t.by_class[4] = failed;
    // Every request in the 10-25 ms bucket.
    t.buckets[2] = ok + failed;
    t
}

fn instance(id: &str, requests: u64, failures: u64, sessions: u64) -> InstanceReading {
    InstanceReading {
        target_id: id.into(),
        address: format!("10.0.0.{}:8000", id.len()).into(),
        requests,
        failures,
        in_flight: 1,
        healthy: failures == 0,
        sessions,
    }
}

fn reading(id: &str, t: Totals, instances: Vec<InstanceReading>) -> Reading {
    Reading {
        endpoint_id: id.into(),
        totals: t,
        in_flight: 2,
        instances,
    }
}

fn fifteen(s: &Series, id: &str, now: i64) -> Vec<TrafficPoint> {
    s.traffic(id, TrafficWindow::Minutes15, now)
}

#[test]
fn each_point_holds_what_grew_since_the_sample_before() {
    let s = Series::default();
    s.record(
        T0,
        vec![reading("e", totals(5, 1), vec![instance("a", 6, 1, 2)])],
    );
    s.record(
        T0 + 10_000,
        vec![reading("e", totals(12, 1), vec![instance("a", 13, 1, 4)])],
    );
    s.record(
        T0 + 20_000,
        vec![reading("e", totals(12, 1), vec![instance("a", 13, 1, 0)])],
    );
    let p = fifteen(&s, "e", T0 + 20_000);
    assert_eq!(p.len(), 3);
    // The first sample counts from zero: the counters were made with the endpoint.
    assert_eq!(
        (p[0].requests, p[0].by_class[1], p[0].by_class[4]),
        (6, 5, 1)
    );
    assert_eq!((p[0].bytes_in, p[0].bytes_out), (600, 5000));
    assert!((p[0].error_rate - 1.0 / 6.0).abs() < 1e-9);
    assert_eq!(
        (p[1].requests, p[1].by_class[4], p[1].error_rate),
        (7, 0, 0.0)
    );
    assert_eq!((p[1].bytes_in, p[1].bytes_out), (700, 7000));
    assert_eq!((p[1].prompt_tokens, p[1].completion_tokens), (21, 7));
    assert_eq!(p[1].at, T0 + 10_000);
    assert_eq!(p[1].span_ms, 10_000);
    assert_eq!(p[1].per_minute(p[1].requests), 42.0);
    // A quiet interval: zero, not absent.
    assert_eq!((p[2].requests, p[2].ttfb_p50_ms), (0, None));
    assert_eq!(p[2].in_flight, 2, "in flight is as sampled, not a delta");
    let i = &p[1].instances[0];
    assert_eq!(
        (i.requests, i.failures, i.sessions, i.in_flight),
        (7, 0, 4, 1)
    );
    assert_eq!(p[0].instances[0].failures, 1);
    assert!(!p[0].instances[0].healthy);
}

#[test]
fn a_counter_that_starts_again_counts_from_zero() {
    let s = Series::default();
    s.record(
        T0,
        vec![reading("e", totals(50, 5), vec![instance("a", 55, 5, 1)])],
    );
    // The counters were made anew (lower than before): all of it is new, never a wrap-around.
    s.record(
        T0 + 10_000,
        vec![reading("e", totals(3, 0), vec![instance("a", 3, 0, 1)])],
    );
    let p = fifteen(&s, "e", T0 + 10_000);
    assert_eq!(p[1].requests, 3);
    assert_eq!(p[1].bytes_out, 3000);
    assert_eq!(p[1].instances[0].requests, 3);
}

#[test]
fn endpoints_and_instances_come_and_go() {
    let s = Series::default();
    s.record(
        T0,
        vec![reading("old", totals(1, 0), vec![instance("a", 1, 0, 1)])],
    );
    // A new endpoint and a new instance count from zero; the endpoint gone is dropped.
    s.record(
        T0 + 10_000,
        vec![reading("new", totals(4, 0), vec![instance("b", 4, 0, 2)])],
    );
    assert_eq!(s.len("old"), 0);
    assert!(fifteen(&s, "old", T0 + 10_000).is_empty());
    let p = fifteen(&s, "new", T0 + 10_000);
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].requests, p[0].span_ms), (4, SAMPLE_MS));
    // An instance added to a known endpoint counts from zero too; one removed is not listed.
    s.record(
        T0 + 20_000,
        vec![reading(
            "new",
            totals(9, 0),
            vec![instance("b", 6, 0, 1), instance("cc", 3, 0, 1)],
        )],
    );
    s.record(
        T0 + 30_000,
        vec![reading("new", totals(10, 0), vec![instance("cc", 4, 0, 1)])],
    );
    let p = fifteen(&s, "new", T0 + 30_000);
    let reqs = |p: &TrafficPoint| -> Vec<(String, u64)> {
        p.instances
            .iter()
            .map(|i| (i.target_id.clone(), i.requests))
            .collect()
    };
    assert_eq!(reqs(&p[1]), [("b".to_string(), 2), ("cc".to_string(), 3)]);
    assert_eq!(reqs(&p[2]), [("cc".to_string(), 1)]);
}

#[test]
fn the_ring_keeps_an_hour() {
    let s = Series::default();
    for i in 0..(KEEP as u64 + 40) {
        s.record(
            T0 + i as i64 * 10_000,
            vec![reading("e", totals(i, 0), vec![])],
        );
    }
    assert_eq!(s.len("e"), KEEP);
    let now = T0 + (KEEP as i64 + 39) * 10_000;
    let hour = s.traffic("e", TrafficWindow::Hour, now);
    assert!(hour.len() <= 61, "one point per minute: {}", hour.len());
    assert_eq!(
        hour.iter().map(|p| p.requests).sum::<u64>(),
        KEEP as u64,
        "one request per sample"
    );
    // 15 minutes: one point per sample, those after now - 15 min.
    let quarter = fifteen(&s, "e", now);
    assert_eq!(quarter.len(), 90);
    assert!(
        quarter.windows(2).all(|w| w[0].at < w[1].at),
        "oldest first"
    );
    assert!(quarter[0].at > now - 15 * MIN);
}

#[test]
fn an_hour_is_told_by_the_minute() {
    let s = Series::default();
    // Two minutes of six samples each; sessions 1..6 then 6..1 on the instance.
    for j in 0..12u64 {
        let mut r = reading(
            "e",
            totals(10 * (j + 1), j + 1),
            vec![instance("a", 11 * (j + 1), 0, 1 + j % 6)],
        );
        r.in_flight = j;
        s.record(T0 + j as i64 * 10_000, vec![r]);
    }
    let p = s.traffic("e", TrafficWindow::Hour, T0 + 11 * 10_000);
    assert_eq!(p.len(), 2);
    for (k, m) in p.iter().enumerate() {
        assert_eq!(m.requests, 66, "minute {k}");
        assert_eq!(m.by_class[4], 6);
        assert_eq!(m.span_ms, 60_000);
        assert_eq!(m.per_minute(m.requests), 66.0);
        assert_eq!(
            m.in_flight,
            6 * k as u64 + 5,
            "as at the minute's last sample"
        );
        assert_eq!(m.instances[0].requests, 66);
        assert_eq!(m.instances[0].sessions, 6, "the busiest sample's");
    }
    assert_eq!(p[1].at, T0 + 11 * 10_000);
}

#[test]
fn percentiles_come_from_the_interval_s_own_buckets() {
    let s = Series::default();
    // 10 requests: 4 under 5 ms, 4 between 5 and 10 ms, 2 between 25 and 50 ms.
    let mut first = Totals::default();
    first.by_class[1] = 10;
    first.buckets[0] = 4;
    first.buckets[1] = 4;
    first.buckets[3] = 2;
    s.record(T0, vec![reading("e", first, vec![])]);
    // Then 100 requests, every one above the last bound (30 s).
    let mut second = first;
    second.by_class[1] += 100;
    second.buckets[SLOTS - 1] = 100;
    s.record(T0 + 10_000, vec![reading("e", second, vec![])]);
    let p = fifteen(&s, "e", T0 + 10_000);
    // Linear inside the bucket that holds the rank: p50 is 5 + 5 * (5 - 4) / 4.
    assert_eq!(p[0].ttfb_p50_ms, Some(6.25));
    assert_eq!(p[0].ttfb_p95_ms, Some(43.75));
    assert_eq!(p[0].ttfb_p99_ms, Some(48.75));
    // The second interval's slow requests are not mixed with the first's fast ones.
    assert_eq!(
        p[1].ttfb_p50_ms,
        Some(30_000.0),
        "above the last bound: that bound"
    );
    assert_eq!(p[1].ttfb_p99_ms, Some(30_000.0));
    // Merged over the minute: 110 requests, the median among the slow ones.
    let m = s.traffic("e", TrafficWindow::Hour, T0 + 10_000);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].requests, 110);
    assert_eq!(m[0].ttfb_p50_ms, Some(30_000.0));
    assert_eq!(m[0].ttfb_p95_ms, Some(30_000.0));
}
