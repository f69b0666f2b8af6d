//! Scheduling history: GPU allocation per pool and per group, queue depth and wait-time
//! percentiles over the last hour, day or week, averaged by the server into buckets (one
//! minute, fifteen minutes, two hours) from the samples the scheduler's leader stores.
//!
//! Every series has one point per bucket of [`History::buckets`]; a bucket without samples
//! (the server was down, or the history is younger) is `null`, never a made-up zero.

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use utoipa::ToSchema;

use crate::error::AppError;

/// How far back a history reaches, and how finely it is bucketed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum HistoryWindow {
    /// The last hour in one-minute buckets.
    #[default]
    Hour,
    /// The last day in fifteen-minute buckets.
    Day,
    /// The last week in two-hour buckets.
    Week,
}

impl HistoryWindow {
    pub const ALL: [HistoryWindow; 3] =
        [HistoryWindow::Hour, HistoryWindow::Day, HistoryWindow::Week];

    /// `hour`, `day` or `week`; nothing (or an empty value) is the hour.
    pub fn parse(value: Option<&str>) -> Result<HistoryWindow, AppError> {
        match value.map(str::trim).unwrap_or("") {
            "" | "hour" => Ok(HistoryWindow::Hour),
            "day" => Ok(HistoryWindow::Day),
            "week" => Ok(HistoryWindow::Week),
            _ => Err(AppError::field("window", "must be hour, day or week")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HistoryWindow::Hour => "hour",
            HistoryWindow::Day => "day",
            HistoryWindow::Week => "week",
        }
    }

    /// What the pages call it.
    pub fn label(self) -> &'static str {
        match self {
            HistoryWindow::Hour => "Last hour",
            HistoryWindow::Day => "Last day",
            HistoryWindow::Week => "Last week",
        }
    }

    /// The length of one bucket in milliseconds.
    pub fn bucket_ms(self) -> i64 {
        match self {
            HistoryWindow::Hour => 60_000,
            HistoryWindow::Day => 15 * 60_000,
            HistoryWindow::Week => 2 * 3_600_000,
        }
    }

    /// How many buckets the window has (60, 96, 84).
    pub fn bucket_count(self) -> usize {
        match self {
            HistoryWindow::Hour => 60,
            HistoryWindow::Day => 96,
            HistoryWindow::Week => 84,
        }
    }
}

/// GPU allocation in one bucket, averaged over its samples (milli-GPUs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AllocationPoint {
    /// In use within reservations.
    pub in_quota_milli: i64,
    /// In use beyond reservations (borrowed, reclaimable).
    pub over_quota_milli: i64,
    /// A pool's capacity not in use; a group's reservation not in use.
    pub idle_milli: i64,
}

/// One tenant's use of a shared pool in one bucket (what platform admins see instead of the
/// tenant's groups).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TenantPoint {
    /// Its jobs admitted within its groups' reservations.
    pub in_quota_milli: i64,
    /// Its jobs admitted beyond them (borrowing).
    pub over_quota_milli: i64,
    /// What the platform lets it reserve on the pool (its grant).
    pub granted_milli: i64,
}

/// A group's allocation and jobs in one bucket; job counts are averages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct GroupPoint {
    pub in_quota_milli: i64,
    pub over_quota_milli: i64,
    /// Its reservation not in use.
    pub unused_reservation_milli: i64,
    pub running: f64,
    pub waiting: f64,
}

/// A queue's depth (averages) and the wait of the jobs that started in one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct QueuePoint {
    pub waiting: f64,
    pub running: f64,
    /// Jobs that started in the bucket (the percentiles are of their waits).
    pub started: i64,
    /// The mean of the samples' medians, weighted by the jobs each one saw start.
    pub wait_p50_ms: Option<i64>,
    /// The largest of the samples' 90th percentiles: a slow minute is not averaged away.
    pub wait_p90_ms: Option<i64>,
    /// The largest of the samples' 99th percentiles.
    pub wait_p99_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TenantAllocation {
    pub tenant_id: String,
    pub tenant_name: String,
    pub points: Vec<Option<TenantPoint>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct PoolHistory {
    pub pool_id: String,
    pub name: String,
    /// Shared by every tenant: its numbers are every tenant's together.
    pub shared: bool,
    pub points: Vec<Option<AllocationPoint>>,
    /// Platform admins, shared pools: each tenant's use and grant (never its groups).
    pub tenants: Vec<TenantAllocation>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct GroupHistory {
    pub group_id: String,
    pub name: String,
    pub points: Vec<Option<GroupPoint>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct QueueHistory {
    pub queue_id: String,
    pub name: String,
    pub group_name: String,
    pub points: Vec<Option<QueuePoint>>,
}

/// `GET /api/v1/scheduling/history`: tenant admins get their tenant's pools (shared ones as
/// totals), groups and queues; members their groups and those groups' queues; platform admins
/// also each tenant's use of every shared pool. Series with nothing to show in the window
/// (no use, no jobs) are left out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct History {
    pub window: HistoryWindow,
    pub bucket_ms: i64,
    /// Each bucket's start (ms since the epoch), oldest first; the last one holds now.
    pub buckets: Vec<i64>,
    /// How many sample sets each bucket averages (0: no data, its points are `null`).
    pub samples: Vec<i64>,
    /// The demo's invented past ends here: samples up to this time were generated when the
    /// demo was seeded, not measured.
    pub generated_until: Option<i64>,
    pub pools: Vec<PoolHistory>,
    pub groups: Vec<GroupHistory>,
    pub queues: Vec<QueueHistory>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_and_cover_their_span() {
        assert_eq!(HistoryWindow::parse(None), Ok(HistoryWindow::Hour));
        assert_eq!(HistoryWindow::parse(Some("week")), Ok(HistoryWindow::Week));
        let Err(AppError::Validation(errors)) = HistoryWindow::parse(Some("month")) else {
            panic!("a month is not a window");
        };
        assert_eq!(errors[0].field, "window");
        // An hour of minutes, a day of quarter hours, a week of two-hour buckets.
        for (w, span) in [
            (HistoryWindow::Hour, 3_600_000),
            (HistoryWindow::Day, 86_400_000),
            (HistoryWindow::Week, 604_800_000),
        ] {
            assert_eq!(w.bucket_ms() * w.bucket_count() as i64, span, "{w:?}");
        }
    }
}
