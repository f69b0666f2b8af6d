//! The driver's snapshot, kept across cycles: read whole when the driver starts leading (at
//! start and after it lost and took back the leader lock), after a failed cycle and every
//! [`RECONCILE`]; in between, each cycle re-reads the configuration (pools, policies, queues:
//! a few rows) and only the job rows changed since the last read, found by their change
//! numbers ([`crate::scheduler::changes`]): each read starts at the horizon taken just before
//! the previous one, so a transaction that commits after a read, however long it ran, is seen
//! at the next, and a row is read again only when a transaction was still running at the
//! previous read.
//!
//! The driver's own wait reasons keep a row's number: it applies them to its snapshot itself
//! once they commit. Nothing unsafe follows from a row seen late: every transition the driver
//! commits is conditional on the state it read (a stale view makes a write change nothing),
//! and the store, not the snapshot, is what a restart trusts.

use std::time::{Duration, Instant};

use super::snapshot::{job_order as order, live_job, load, load_config, Loaded, JOB_COLUMNS};
use super::*;

/// How often the jobs are read whole anyway.
pub(super) const RECONCILE: Duration = Duration::from_secs(300);

/// The longest a settled snapshot goes without a cycle of the core (see [`Live::settle`]).
const QUIET_AT_MOST_MS: i64 = 60_000;

/// What [`Live::refresh`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refreshed {
    /// The snapshot was rebuilt from the configuration and these changed job rows.
    Rows(usize),
    /// Nothing changed since a cycle that settled, and no time-based change is due: the
    /// snapshot is kept as it is (only its `now` moves), and the core would decide as before.
    Quiet,
}

/// Where the next read starts (see [`crate::scheduler::changes`]).
async fn horizon(store: &Store) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(crate::scheduler::changes::horizon_query(store.dialect))
        .fetch_one(&store.pool)
        .await
}

fn is_live(s: JobState) -> bool {
    matches!(
        s,
        JobState::Queued
            | JobState::Admitted
            | JobState::Starting
            | JobState::Running
            | JobState::Preempting
    )
}

pub(super) struct Live {
    pub(super) loaded: Loaded,
    /// Rows numbered at or after this change number are read at the next refresh.
    since: i64,
    /// When the jobs were last read whole.
    full_at: Instant,
    /// Job rows read since the driver last had PostgreSQL's statistics of `jobs` renewed.
    changed_since_analyze: usize,
    /// Whether an `ANALYZE jobs` is running (see [`Live::analyze`]).
    analyzing: Arc<std::sync::atomic::AtomicBool>,
    /// Until when the last cycle's decisions stand if nothing changes (see [`Live::settle`]).
    settled_until: Option<i64>,
}

/// PostgreSQL plans the driver's multi-row `UPDATE … FROM (VALUES …)` statements from the
/// statistics of `jobs`; while they are missing or stale (a table that grew from nothing to
/// thousands of queued jobs in a second, before autovacuum's next round), it estimates one
/// matching row, joins by a nested loop over a sequential scan, and each admission statement
/// of 66 rows took 50 to 150 ms at 5,000 jobs (seconds per cycle). Its multi-row writes now
/// find each row by its id whatever the statistics say ([`super::rows::admit_sql`]); its reads
/// (the rows changed since the last cycle) still use them. The driver has them renewed, beside
/// its cycles, once this many rows, or half its live jobs if more, have changed since it last
/// did.
const ANALYZE_AFTER_ROWS: usize = 500;

impl Live {
    /// Reads everything.
    pub(super) async fn full(
        store: &Store,
        now: i64,
        min_runtime_ms: i64,
    ) -> Result<Live, sqlx::Error> {
        let since = horizon(store).await?;
        let loaded = load(store, now, min_runtime_ms).await?;
        Ok(Live {
            loaded,
            since,
            full_at: Instant::now(),
            changed_since_analyze: 0,
            analyzing: Arc::default(),
            settled_until: None,
        })
    }

    /// Whether the next cycle should read everything.
    pub(super) fn due_for_full_read(&self) -> bool {
        self.full_at.elapsed() >= RECONCILE
    }

    /// Records whether the cycle just made settled: it admitted, preempted, launched, stopped
    /// and re-worded nothing. Then, until a job row or the configuration changes, or time
    /// reaches the core's next time-based change ([`core::next_time_change`]), another cycle
    /// of the core would decide the same, and [`Live::refresh`] says [`Refreshed::Quiet`]
    /// (with a cycle at least every [`QUIET_AT_MOST_MS`] anyway). At 100k waiting jobs this
    /// is what keeps an idle server's once-a-second cycle to a few small reads.
    pub(super) fn settle(&mut self, settled: bool, now: i64) {
        self.settled_until = settled.then(|| {
            core::next_time_change(&self.loaded.snap)
                .unwrap_or(i64::MAX)
                .min(now.saturating_add(QUIET_AT_MOST_MS))
        });
    }

    /// Brings the snapshot up to `now`: the configuration read again, the job rows changed
    /// since the last read applied, the core's snapshot rebuilt. Returns the job rows read,
    /// or [`Refreshed::Quiet`] when nothing changed since a settled cycle.
    pub(super) async fn refresh(
        &mut self,
        store: &Store,
        now: i64,
        min_runtime_ms: i64,
    ) -> Result<Refreshed, sqlx::Error> {
        let mut next = load_config(store, now, min_runtime_ms).await?;
        let settled = self.settled_until.take().filter(|&until| now < until);
        let mut jobs = std::mem::take(&mut self.loaded.jobs);
        if next.queue_index != self.loaded.queue_index {
            for j in &mut jobs {
                j.queue = next.queue_index.get(&j.queue_id).copied();
            }
        }
        let next_since = horizon(store).await?;
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE change_seq >= $1"
        ))
        .bind(self.since)
        .fetch_all(&store.pool)
        .await?;
        if rows.is_empty() && settled.is_some() && next.same_config(&self.loaded) {
            self.loaded.jobs = jobs;
            self.loaded.snap.now = now;
            self.since = next_since;
            self.settled_until = settled;
            return Ok(Refreshed::Quiet);
        }
        let mut gone = false;
        let mut added = Vec::new();
        for r in &rows {
            let j = live_job(r, &next.queue_index)?;
            match jobs.binary_search_by(|x| order(x, &j)) {
                Ok(i) => {
                    gone |= !is_live(j.state);
                    jobs[i] = j;
                }
                Err(_) if is_live(j.state) => added.push(j),
                Err(_) => {}
            }
        }
        if gone {
            jobs.retain(|j| is_live(j.state));
        }
        if !added.is_empty() {
            added.sort_by(order);
            let in_order = jobs
                .last()
                .is_none_or(|last| order(last, &added[0]).is_lt());
            jobs.append(&mut added);
            if !in_order {
                jobs.sort_by(order);
            }
        }
        next.jobs = jobs;
        next.fill(store, now).await?;
        self.loaded = next;
        self.since = next_since;
        if store.dialect == Dialect::Postgres {
            self.changed_since_analyze += rows.len();
            if self.changed_since_analyze >= ANALYZE_AFTER_ROWS.max(self.loaded.jobs.len() / 2)
                && self.analyze(store)
            {
                self.changed_since_analyze = 0;
            }
        }
        Ok(Refreshed::Rows(rows.len()))
    }

    /// Has `ANALYZE jobs` run beside the cycles (10 to 40 ms at a few thousand jobs, which the
    /// cycle does not wait for; its multi-row writes do not depend on them, see
    /// [`super::rows::admit_sql`]). False when the previous one is still running.
    fn analyze(&self, store: &Store) -> bool {
        if self
            .analyzing
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return false;
        }
        let (pool, analyzing, rows) = (
            store.pool.clone(),
            self.analyzing.clone(),
            self.loaded.jobs.len(),
        );
        tokio::spawn(async move {
            let t = Instant::now();
            match sqlx::query("ANALYZE jobs").execute(&pool).await {
                Ok(_) => tracing::debug!(
                    rows,
                    us = t.elapsed().as_micros() as u64,
                    "scheduler: renewed the statistics of jobs"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "scheduler: renewing the statistics of jobs failed")
                }
            }
            analyzing.store(false, std::sync::atomic::Ordering::Release);
        });
        true
    }

    /// Applies wait reasons the driver committed (they keep the rows' change numbers).
    pub(super) fn set_wait(&mut self, waits: Vec<(u64, &'static str, String)>) {
        for (job, code, text) in waits {
            if let Some(j) = self.loaded.jobs.get_mut(job as usize) {
                j.wait_code = Some(code.to_string());
                j.wait_reason = Some(text);
            }
        }
    }
}
