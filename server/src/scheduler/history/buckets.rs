//! The arithmetic of the history's buckets, with no I/O and no clock.
//!
//! A window's buckets are aligned to their length (a minute starts at :00, a two-hour bucket
//! at an even UTC hour), the last one holding `now`. The store adds a bucket's rows up per
//! series ([`Sums`]); a point is then:
//! - GPU amounts and queue depths: the sum over the bucket's sample sets divided by how many
//!   sets it has (a series missing from a set counted zero then), so one busy minute in a
//!   quiet quarter hour shows as a fifteenth of itself, as an average should;
//! - the median wait: the mean of the sets' medians weighted by the jobs each set saw start
//!   (a set in which one job started weighs as one job);
//! - the 90th and 99th percentiles: the largest of the sets'. A tail is what one asks these
//!   for, and averaging would hide the one slow minute in a day.

/// The buckets of a window at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// The first bucket's start.
    pub from: i64,
    pub bucket_ms: i64,
    pub count: usize,
}

impl Grid {
    /// `count` buckets of `bucket_ms`, the last one holding `now`.
    pub fn new(now: i64, bucket_ms: i64, count: usize) -> Grid {
        let last = now.div_euclid(bucket_ms) * bucket_ms;
        Grid {
            from: last - (count as i64 - 1) * bucket_ms,
            bucket_ms,
            count,
        }
    }

    /// The end of the last bucket (exclusive).
    pub fn end(&self) -> i64 {
        self.from + self.count as i64 * self.bucket_ms
    }

    /// Each bucket's start, oldest first.
    pub fn starts(&self) -> Vec<i64> {
        (0..self.count as i64)
            .map(|i| self.from + i * self.bucket_ms)
            .collect()
    }

    /// The bucket an instant falls in (the store computes the same `(at - from) / bucket`).
    pub fn index(&self, at: i64) -> Option<usize> {
        (self.from..self.end())
            .contains(&at)
            .then(|| ((at - self.from) / self.bucket_ms) as usize)
    }
}

/// One series' rows in one bucket, added up by the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sums {
    pub in_quota_milli: i64,
    pub over_quota_milli: i64,
    pub idle_milli: i64,
    pub reserved_milli: i64,
    pub waiting: i64,
    pub running: i64,
    pub started: i64,
    /// The sum of each row's median wait times the jobs it saw start.
    pub p50_weighted: i64,
    pub p90_max: Option<i64>,
    pub p99_max: Option<i64>,
}

/// A whole-number average of `sum` over `sets` sample sets, rounded to the nearest (half up);
/// `None` without sets.
pub fn mean(sum: i64, sets: i64) -> Option<i64> {
    (sets > 0).then(|| (2 * sum + sets).div_euclid(2 * sets))
}

/// The average of a count (jobs waiting, running) over `sets` sample sets, to a tenth.
pub fn mean_count(sum: i64, sets: i64) -> Option<f64> {
    mean(sum * 10, sets).map(|tenths| tenths as f64 / 10.0)
}

/// The bucket's wait percentiles (p50, p90, p99) as the module says; `None` where no job
/// started in it.
pub fn percentiles(s: &Sums) -> (Option<i64>, Option<i64>, Option<i64>) {
    if s.started <= 0 {
        return (None, None, None);
    }
    (mean(s.p50_weighted, s.started), s.p90_max, s.p99_max)
}

/// The `pct` percentile of sorted values by nearest rank: the smallest value that at least
/// `pct` percent of the values do not exceed.
pub fn nearest_rank(sorted: &[i64], pct: u32) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len() as u64;
    // ceil(pct / 100 * n), at least the first.
    let rank = (u64::from(pct) * n).div_ceil(100).max(1);
    sorted.get(rank as usize - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-12-02 17:04:05.123 UTC.
    const NOW: i64 = 1_796_231_045_123;

    #[test]
    fn an_hour_is_sixty_minutes_ending_in_the_current_one() {
        let g = Grid::new(NOW, 60_000, 60);
        // The current minute starts at 17:04:00 = NOW - 5.123 s; the first at 16:05:00.
        assert_eq!(g.from, 1_796_231_040_000 - 59 * 60_000);
        assert_eq!(g.from, 1_796_227_500_000);
        assert_eq!(g.end(), 1_796_231_100_000, "17:05:00");
        assert_eq!(g.index(NOW), Some(59));
        assert_eq!(g.index(1_796_227_500_000), Some(0));
        assert_eq!(
            g.index(1_796_227_499_999),
            None,
            "16:04:59.999 is before the hour"
        );
        assert_eq!(g.index(1_796_231_100_000), None, "17:05 is in the future");
        assert_eq!(g.starts().len(), 60);
        assert_eq!(g.starts()[1], 1_796_227_560_000, "16:06:00");
    }

    #[test]
    fn a_week_of_two_hour_buckets_starts_at_an_even_hour() {
        let g = Grid::new(NOW, 7_200_000, 84);
        // 17:04 is in the 16:00 bucket; 83 buckets (166 h) earlier is 2026-11-25 18:00.
        assert_eq!(g.from, 1_796_227_200_000 - 166 * 3_600_000);
        assert_eq!(g.from, 1_795_629_600_000);
        assert_eq!(g.index(NOW), Some(83));
        assert_eq!(g.index(g.from + 7_199_999), Some(0));
        assert_eq!(g.index(g.from + 7_200_000), Some(1));
    }

    #[test]
    fn a_day_of_quarter_hours() {
        let g = Grid::new(NOW, 900_000, 96);
        // 17:04 is in the 17:00 quarter; 95 quarters before is 17:15 the day before.
        assert_eq!(g.from, 1_796_230_800_000 - 95 * 900_000);
        assert_eq!(g.index(NOW), Some(95));
        assert_eq!(g.end() - g.from, 86_400_000);
    }

    #[test]
    fn averages_divide_by_the_sets_and_round_half_up() {
        // 1000 + 2000 + nothing (zero) over three sets: 1000.
        assert_eq!(mean(3000, 3), Some(1000));
        // 2.5 GPUs in milli over two sets: 1250.
        assert_eq!(mean(2500, 2), Some(1250));
        // 1/3 and 2/3 of a milli-GPU.
        assert_eq!(mean(1, 3), Some(0));
        assert_eq!(mean(2, 3), Some(1));
        // Exactly half rounds up.
        assert_eq!(mean(1, 2), Some(1));
        assert_eq!(mean(5, 0), None, "no sets, no number");
        // Three waiting, then none, then none: one on average; seven over three is 2.3.
        assert_eq!(mean_count(3, 3), Some(1.0));
        assert_eq!(mean_count(7, 3), Some(2.3));
        assert_eq!(mean_count(1, 4), Some(0.3), "0.25 rounds half up");
    }

    #[test]
    fn the_median_is_weighted_by_starts_and_the_tail_is_the_worst() {
        // Two sets: 3 jobs started with a median of 10 s and a p99 of 20 s, then 1 job that
        // waited 50 s. Weighted median: (3 * 10 + 1 * 50) / 4 = 20 s; p99: 50 s.
        let s = Sums {
            started: 4,
            p50_weighted: 3 * 10_000 + 50_000,
            p90_max: Some(50_000),
            p99_max: Some(50_000),
            ..Default::default()
        };
        assert_eq!(percentiles(&s), (Some(20_000), Some(50_000), Some(50_000)));
        assert_eq!(percentiles(&Sums::default()), (None, None, None));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let waits = [0, 0, 30_000];
        assert_eq!(nearest_rank(&waits, 50), Some(0), "rank 2 of 3");
        assert_eq!(nearest_rank(&waits, 90), Some(30_000), "rank 3 of 3");
        let hundred: Vec<i64> = (1..=100).collect();
        assert_eq!(nearest_rank(&hundred, 50), Some(50));
        assert_eq!(nearest_rank(&hundred, 90), Some(90));
        assert_eq!(nearest_rank(&hundred, 99), Some(99));
        assert_eq!(nearest_rank(&[7], 99), Some(7));
        assert_eq!(nearest_rank(&[], 50), None);
    }
}
