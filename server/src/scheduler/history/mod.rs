//! Scheduling history: the counts the scheduler's leader publishes ([`Summary`]), sampled once
//! a minute into `scheduling_samples`, and read back bucketed for the charts of GPU allocation,
//! queue depth and wait times over the last hour, day and week.
//!
//! [`sampler`] takes the samples (on the leader only) and prunes those older than eight days;
//! [`read`] answers `GET /api/v1/scheduling/history`, scoped to what the caller may see;
//! [`buckets`] is the pure arithmetic of the buckets.
//!
//! Samples are measurements, not state changes: they are written without an audit entry (the
//! audit log records who changed what; a sample changes nothing), and never wake the scheduler.
//!
//! Owns the table `scheduling_samples`.
//!
//! [`Summary`]: super::driver::Summary

pub mod buckets;
pub mod generated;
pub mod read;
pub mod sampler;
#[cfg(test)]
mod tests;

pub use sampler::beside;

use crate::store::WriteTx;

/// How long samples are kept.
pub const RETENTION_MS: i64 = 8 * 86_400_000;

/// Most sample sets one prune removes: a store that was not pruned for a long time (the demo's
/// invented week, a leader that was down) is caught up over a few passes instead of one long
/// delete that holds the write lock.
pub const PRUNE_SETS: i64 = 60;

/// What a sample row counts (see migration 0016).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Series {
    /// The marker of a sample set: the sampler counted at its `at`.
    Set,
    /// Every tenant's use of a pool.
    Pool,
    /// One tenant's use of a shared pool, with its grant there.
    TenantPool,
    /// A group's use, unused reservation and jobs.
    Group,
    /// A queue's jobs and the waits of those that started.
    Queue,
}

impl Series {
    pub fn as_str(self) -> &'static str {
        match self {
            Series::Set => "set",
            Series::Pool => "pool",
            Series::TenantPool => "tenant_pool",
            Series::Group => "group",
            Series::Queue => "queue",
        }
    }
}

/// One row of a sample set. A row whose numbers are all zero is not written: a series missing
/// from a set counted zero then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleRow {
    pub series: Series,
    pub tenant_id: Option<String>,
    pub pool_id: Option<String>,
    pub group_id: Option<String>,
    pub queue_id: Option<String>,
    pub in_quota_milli: i64,
    pub over_quota_milli: i64,
    pub idle_milli: i64,
    pub reserved_milli: i64,
    pub waiting: i64,
    pub running: i64,
    pub started: i64,
    pub wait_p50_ms: Option<i64>,
    pub wait_p90_ms: Option<i64>,
    pub wait_p99_ms: Option<i64>,
}

impl SampleRow {
    /// A row of `series` with every number zero.
    pub fn new(series: Series) -> SampleRow {
        SampleRow {
            series,
            tenant_id: None,
            pool_id: None,
            group_id: None,
            queue_id: None,
            in_quota_milli: 0,
            over_quota_milli: 0,
            idle_milli: 0,
            reserved_milli: 0,
            waiting: 0,
            running: 0,
            started: 0,
            wait_p50_ms: None,
            wait_p90_ms: None,
            wait_p99_ms: None,
        }
    }

    fn is_zero(&self) -> bool {
        self.in_quota_milli == 0
            && self.over_quota_milli == 0
            && self.idle_milli == 0
            && self.reserved_milli == 0
            && self.waiting == 0
            && self.running == 0
            && self.started == 0
    }
}

/// The rows counted at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleSet {
    pub at: i64,
    /// Invented (the demo's past), not measured.
    pub generated: bool,
    pub rows: Vec<SampleRow>,
}

const COLUMNS: usize = 17;

/// Writes sample sets (each with its marker row) in the caller's transaction.
pub async fn write(tx: &mut WriteTx, sets: &[SampleSet]) -> Result<(), sqlx::Error> {
    let set_marker = SampleRow::new(Series::Set);
    let rows: Vec<(i64, bool, &SampleRow)> = sets
        .iter()
        .flat_map(|s| {
            std::iter::once(&set_marker)
                .chain(s.rows.iter().filter(|r| !r.is_zero()))
                .map(move |r| (s.at, s.generated, r))
        })
        .collect();
    for chunk in rows.chunks(tx.dialect.statement_params() / COLUMNS) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let n = i * COLUMNS;
                let params: Vec<String> = (1..=COLUMNS).map(|c| format!("${}", n + c)).collect();
                format!("({})", params.join(", "))
            })
            .collect();
        let sql = format!(
            "INSERT INTO scheduling_samples (at, kind, tenant_id, pool_id, group_id, queue_id, in_quota_milli, over_quota_milli, idle_milli, reserved_milli, waiting, running, started, wait_p50_ms, wait_p90_ms, wait_p99_ms, generated) VALUES {}",
            values.join(", ")
        );
        let mut q = sqlx::query(&sql);
        for (at, generated, r) in chunk {
            q = q
                .bind(*at)
                .bind(r.series.as_str())
                .bind(r.tenant_id.clone())
                .bind(r.pool_id.clone())
                .bind(r.group_id.clone())
                .bind(r.queue_id.clone())
                .bind(r.in_quota_milli)
                .bind(r.over_quota_milli)
                .bind(r.idle_milli)
                .bind(r.reserved_milli)
                .bind(r.waiting)
                .bind(r.running)
                .bind(r.started)
                .bind(r.wait_p50_ms)
                .bind(r.wait_p90_ms)
                .bind(r.wait_p99_ms)
                .bind(i64::from(*generated));
        }
        q.execute(&mut *tx.tx).await?;
    }
    Ok(())
}

/// Deletes the oldest sample sets taken before `before`, at most [`PRUNE_SETS`] of them.
/// Returns the rows deleted.
pub async fn prune(tx: &mut WriteTx, before: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "DELETE FROM scheduling_samples WHERE at < $1 AND at IN
           (SELECT at FROM scheduling_samples WHERE kind = 'set' AND at < $1 ORDER BY at LIMIT $2)",
    )
    .bind(before)
    .bind(PRUNE_SETS)
    .execute(&mut *tx.tx)
    .await?;
    Ok(done.rows_affected())
}
