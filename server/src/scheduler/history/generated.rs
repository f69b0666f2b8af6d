//! An invented week of history for the demo (`crate::demo` seeds it into a fresh demo, marked
//! `generated`, so the history page is not empty for its first hours and says why it is not).
//! Pure: the ids and the time come in, sample sets go out.
//!
//! A sample set a minute for the last day (up to the current minute; the sampler takes the
//! next) and one every ten minutes before. Weekdays from
//! 08:00 to 19:00 UTC are busy: research uses its whole reservation and borrows idle GPUs of
//! the shared pool, and its training jobs queue; at night data engineering's batches queue
//! at its limit and globex borrows instead. The demo's own pools, groups and queues: research's
//! last two GPUs in quota are on acme-a100, with data engineering's two.

use super::{SampleRow, SampleSet, Series};

/// The demo's ids: a team is (tenant, group, queue).
pub struct DemoIds {
    pub shared: String,
    pub a100: String,
    pub research: (String, String, String),
    pub inference: (String, String, String),
    pub etl: (String, String, String),
    pub forecast: (String, String, String),
}

/// One team at one instant: milli-GPUs in quota and over quota, running and waiting jobs, its
/// reservation and the median wait of the jobs that start.
struct Use {
    in_quota: i64,
    over_quota: i64,
    running: i64,
    waiting: i64,
    reserved: i64,
    median_wait_ms: i64,
}

/// A small deterministic noise source (a linear congruential generator).
struct Noise(u64);

impl Noise {
    /// A whole number in `0..n`.
    fn below(&mut self, n: i64) -> i64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n.max(1) as u64) as i64
    }
}

/// The sample sets of the week up to `now` (the last one at the start of its minute: the
/// sampler's first is at the next), newest first.
pub fn invented_week(ids: &DemoIds, now: i64) -> Vec<SampleSet> {
    let now = now.div_euclid(60_000) * 60_000;
    let minutes = (0..1440).map(|k| now - k * 60_000);
    let tens = (145..=1008).map(|k| now - k * 600_000);
    let mut noise = Noise(0x5eed);
    minutes
        .chain(tens)
        .map(|at| SampleSet {
            at,
            generated: true,
            rows: rows(ids, at, &mut noise),
        })
        .collect()
}

fn rows(ids: &DemoIds, at: i64, n: &mut Noise) -> Vec<SampleRow> {
    let (day, hour) = (
        at.div_euclid(86_400_000),
        at.rem_euclid(86_400_000) / 3_600_000,
    );
    // 1970-01-01 was a Thursday: (day + 4) % 7 is 0 on Sundays, 6 on Saturdays.
    let busy = (8..19).contains(&hour) && !matches!((day + 4) % 7, 0 | 6);
    let research = if busy {
        let borrowed = 1000 * n.below(5);
        Use {
            in_quota: 8000,
            over_quota: borrowed,
            running: 8 + borrowed / 1000,
            waiting: 2 + n.below(5),
            reserved: 8000,
            median_wait_ms: 90_000,
        }
    } else {
        Use {
            in_quota: 4000,
            over_quota: 0,
            running: 4,
            waiting: n.below(2),
            reserved: 8000,
            median_wait_ms: 15_000,
        }
    };
    let inference_gpus = 2000 + 1000 * if busy { n.below(3) } else { 0 };
    let inference = Use {
        in_quota: inference_gpus,
        over_quota: 0,
        running: inference_gpus / 1000,
        waiting: 0,
        reserved: 6000,
        median_wait_ms: 5_000,
    };
    let etl = Use {
        in_quota: 2000,
        over_quota: 0,
        running: 2,
        waiting: if busy { 1 } else { 3 + n.below(6) },
        reserved: 2000,
        median_wait_ms: if busy { 60_000 } else { 1_200_000 },
    };
    let forecast_in = 1000 + 1000 * n.below(2);
    let forecast_over = if busy { 0 } else { 1000 * n.below(3) };
    let forecast = Use {
        in_quota: forecast_in,
        over_quota: forecast_over,
        running: (forecast_in + forecast_over) / 1000,
        waiting: n.below(2),
        reserved: 2000,
        median_wait_ms: 30_000,
    };

    let mut out = Vec::new();
    for ((tenant, group, queue), u) in [
        (&ids.research, &research),
        (&ids.inference, &inference),
        (&ids.etl, &etl),
        (&ids.forecast, &forecast),
    ] {
        let team = |s: Series| SampleRow {
            tenant_id: Some(tenant.clone()),
            group_id: Some(group.clone()),
            ..SampleRow::new(s)
        };
        out.push(SampleRow {
            in_quota_milli: u.in_quota,
            over_quota_milli: u.over_quota,
            idle_milli: (u.reserved - u.in_quota).max(0),
            reserved_milli: u.reserved,
            running: u.running,
            waiting: u.waiting,
            ..team(Series::Group)
        });
        let started = n.below(if busy { 4 } else { 2 });
        let median = (started > 0).then(|| u.median_wait_ms + u.median_wait_ms * n.below(5) / 10);
        out.push(SampleRow {
            queue_id: Some(queue.clone()),
            running: u.running,
            waiting: u.waiting,
            started,
            wait_p50_ms: median,
            wait_p90_ms: median.map(|w| w * 3),
            wait_p99_ms: median.map(|w| w * 6),
            ..team(Series::Queue)
        });
    }

    // The shared pool: inference, research beyond its two GPUs on acme-a100, and globex.
    let acme = (
        research.in_quota - 2000 + inference.in_quota,
        research.over_quota,
    );
    let globex = (forecast.in_quota, forecast.over_quota);
    for (tenant, (in_quota, over_quota), granted) in [
        (&ids.research.0, acme, 14_000),
        (&ids.forecast.0, globex, 2000),
    ] {
        out.push(SampleRow {
            tenant_id: Some(tenant.clone()),
            pool_id: Some(ids.shared.clone()),
            in_quota_milli: in_quota,
            over_quota_milli: over_quota,
            reserved_milli: granted,
            ..SampleRow::new(Series::TenantPool)
        });
    }
    let shared = (acme.0 + globex.0, acme.1 + globex.1);
    for (pool, owner, capacity, (in_quota, over_quota)) in [
        (&ids.shared, None, 16_000, shared),
        (&ids.a100, Some(ids.research.0.clone()), 4000, (4000, 0)),
    ] {
        out.push(SampleRow {
            tenant_id: owner,
            pool_id: Some(pool.clone()),
            in_quota_milli: in_quota,
            over_quota_milli: over_quota,
            idle_milli: (capacity - in_quota - over_quota).max(0),
            ..SampleRow::new(Series::Pool)
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> DemoIds {
        let team = |t: &str, g: &str| (t.to_string(), format!("g-{g}"), format!("q-{g}"));
        DemoIds {
            shared: "shared".into(),
            a100: "a100".into(),
            research: team("acme", "research"),
            inference: team("acme", "inference"),
            etl: team("acme", "etl"),
            forecast: team("globex", "forecast"),
        }
    }

    #[test]
    fn a_week_that_fits_the_pools() {
        // 2026-12-02 17:04:05 UTC, a Wednesday.
        let sets = invented_week(&ids(), 1_796_231_045_123);
        assert_eq!(
            sets.len(),
            1440 + 864,
            "a day of minutes and six days of ten minutes"
        );
        assert_eq!(
            sets[0].at, 1_796_231_040_000,
            "the last one at the current minute"
        );
        assert!(sets.iter().all(|s| s.generated));
        let oldest = sets.iter().map(|s| s.at).min().unwrap_or(0);
        assert_eq!(oldest, 1_796_231_040_000 - 7 * 86_400_000);
        for s in &sets {
            for r in s.rows.iter().filter(|r| r.series == Series::Pool) {
                let capacity = if r.pool_id.as_deref() == Some("shared") {
                    16_000
                } else {
                    4000
                };
                assert_eq!(
                    r.in_quota_milli + r.over_quota_milli + r.idle_milli,
                    capacity,
                    "{r:?}"
                );
            }
        }
        // A weekday at 10:00 is busy: research borrows or queues.
        let ten = sets
            .iter()
            .find(|s| s.at == 1_796_205_600_000)
            .expect("10:00");
        let research = ten
            .rows
            .iter()
            .find(|r| r.series == Series::Group && r.group_id.as_deref() == Some("g-research"));
        assert_eq!(research.map(|r| r.in_quota_milli), Some(8000));
    }
}
