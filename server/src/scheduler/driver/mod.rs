//! The driver: runs the [`core`](super::core) on every relevant change (a poke after a submit,
//! an abort, a policy change, an executor event) and on a tick; commits its decisions; hands
//! admitted jobs to their pool's executor and stops the ones to preempt or abort; commits what
//! the executors report.
//!
//! Every transition is written in one transaction together with its `job_events` row and its
//! audit entry (actor `scheduler`); a cycle's transitions share one transaction. Nothing that
//! matters is held only in memory: the driver remembers which stops it already sent in this
//! process (a restart re-sends them), and keeps its snapshot between cycles as a cache of the
//! store, brought up to date from the rows changed since (see `live.rs`) and read whole at
//! start, on each new leadership term, after a failed cycle and every five minutes. After
//! each refresh it publishes the counts the pages show ([`Summary`]).
//!
//! # Restart
//! At start the driver hands every job the store has in `starting`, `running` or `preempting`
//! to its executor's [`adopt`](crate::nodes::executor::Executor::adopt) (retried until the store
//! answers). The executor finds the process again (by its stored handle, or, for a `starting`
//! job whose `running` was never stored, by what its wrapper left in the job's folder), reports
//! its exit, starts it when it provably never started, or reports it lost. Then the stops of
//! `preempting` and aborting jobs are sent again; an executor runs a job's abort callback at
//! most once per attempt, so a stop sent again does not run it twice. Every stop's intent is
//! committed before its signal, so a job that ended during a stop ends as the stop decides
//! (a preempted job is requeued), whatever its exit code. An `admitted` job was never handed
//! to an executor (the state `starting` is committed before `launch`), so it is launched as
//! usual. No job is lost or started twice.
//!
//! # One driver per database
//! On PostgreSQL several replicas may share the database; the driver takes a session advisory
//! lock (per schema) and only the holder schedules. The others wait and take over when it goes.

mod commit;
mod events;
mod live;
mod rows;
mod snapshot;
#[cfg(test)]
mod split_tests;
mod stats;
mod summary;

use rows::{insert_events, EventRow};
pub(crate) use snapshot::{load, LiveJob, Loaded};
pub use stats::{Stats, RECENT_CYCLES};
pub use summary::{GroupUse, Summary};

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::sync::Notify;

use app::model::{format_gpus as gpus, ExecutorKind, JobState, PoolNode, RequestMeta};

use super::changes::set_change;
use super::core::{self, Decisions, WaitReason};
use crate::audit::{self, Actor, BatchRecord, Chain};
pub use crate::config::DriverConfig;
use crate::nodes::executor::disabled::DisabledExecutor;
use crate::nodes::executor::local::LocalExecutor;
use crate::nodes::executor::sandbox::{self, JobUser};
use crate::nodes::executor::simulated::SimulatedExecutor;
use crate::nodes::executor::{
    AbortCallback, AbortKind, Adopt, Events, ExecEvent, Executor, Launch, StopReason,
};
use crate::store::{corrupt, new_id, opt_text_enum, text_enum, Dialect, Store, WriteTx};

/// Wakes the driver, and shows its counters. Domain operations that change scheduling state
/// wake it through their transaction ([`crate::store::WriteTx::wake_scheduler`]), which
/// signals the same `Notify` once it commits.
#[derive(Clone)]
pub struct SchedulerHandle {
    notify: Arc<Notify>,
    pub stats: Arc<Stats>,
    /// What the leading driver's snapshot counts (see [`SchedulerHandle::summary`]).
    summary: Arc<tokio::sync::watch::Sender<Option<Arc<Summary>>>>,
}

impl Default for SchedulerHandle {
    fn default() -> Self {
        SchedulerHandle {
            notify: Default::default(),
            stats: Default::default(),
            summary: Arc::new(tokio::sync::watch::Sender::new(None)),
        }
    }
}

impl SchedulerHandle {
    /// A handle woken by the store's commits that change scheduling state.
    pub fn for_store(store: &Store) -> SchedulerHandle {
        SchedulerHandle {
            notify: store.scheduling_changed.clone(),
            ..Default::default()
        }
    }
}

impl SchedulerHandle {
    /// Asks for a cycle soon (coalesced: many pokes make one cycle).
    pub fn poke(&self) {
        self.notify.notify_one();
    }
}

/// The executor of `local` pools: real processes as the job user when the server allows local
/// pools and can start jobs as that user; otherwise one that runs nothing and says why.
fn local_executor(cfg: &DriverConfig, tx: Events) -> Arc<dyn Executor> {
    if !cfg.allow_local_pools {
        return Arc::new(DisabledExecutor::new(
            tx,
            "local pools are turned off on this server (setting allow_local_pools)",
        ));
    }
    let user = JobUser {
        uid: cfg.job_uid,
        gid: cfg.job_gid,
    };
    match sandbox::plan(user) {
        Ok(user) => Arc::new(LocalExecutor::with_user(cfg.jobs_dir.clone(), tx, user)),
        Err(reason) => {
            tracing::error!(%reason, "scheduler: local pools cannot run");
            Arc::new(DisabledExecutor::new(tx, reason))
        }
    }
}

/// Starts the driver on the current runtime. Dropping the returned handle does not stop it;
/// abort the task to stop it.
pub fn start(
    store: Store,
    cfg: DriverConfig,
    handle: SchedulerHandle,
) -> tokio::task::JoinHandle<()> {
    let mut d = Driver::new(store, cfg, handle);
    tokio::spawn(async move { d.run().await })
}

struct Driver {
    store: Store,
    cfg: DriverConfig,
    handle: SchedulerHandle,
    rx: UnboundedReceiver<ExecEvent>,
    sim: Arc<dyn Executor>,
    local: Arc<dyn Executor>,
    /// Jobs whose stop was sent to their executor by this process.
    stops_sent: HashSet<String>,
    /// The snapshot kept across cycles while this process leads.
    live: Option<live::Live>,
    meta: RequestMeta,
    actor: Actor,
}

impl Driver {
    fn new(store: Store, cfg: DriverConfig, handle: SchedulerHandle) -> Driver {
        let (tx, rx) = unbounded_channel();
        let sim: Arc<dyn Executor> =
            Arc::new(SimulatedExecutor::new(tx.clone(), cfg.sim_checkpoint_ms));
        let local = local_executor(&cfg, tx);
        Driver {
            store,
            cfg,
            handle,
            rx,
            sim,
            local,
            stops_sent: HashSet::new(),
            live: None,
            meta: RequestMeta {
                source_ip: String::new(),
                request_id: "scheduler".into(),
            },
            actor: Actor::system("scheduler"),
        }
    }

    /// Appends the driver's entries to its tenants' `lane` chains, inside `tx`: the driver's
    /// lanes are [`Chain::Scheduler`], and [`Chain::Scheduler1`] for the second half of a
    /// write committed in two halves side by side (see `audit::lanes`).
    async fn audit(
        &self,
        tx: &mut WriteTx,
        now: i64,
        lane: Chain,
        audits: &[BatchRecord],
    ) -> Result<(), sqlx::Error> {
        audit::append_many(tx, now, lane, &self.actor, &self.meta, audits).await
    }

    async fn run(&mut self) {
        let mut pending_events: Vec<ExecEvent> = Vec::new();
        let mut first = true;
        loop {
            let mut lock = self.leadership().await;
            if first {
                // Retried until it succeeds: a job that is not adopted would keep its capacity
                // (and its process would run unwatched) until the next restart.
                let mut failures = 0u32;
                while let Err(e) = self.recover().await {
                    failures = failures.saturating_add(1);
                    tracing::error!(error = %e, failures, "scheduler: restart recovery failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 << failures.min(5))).await;
                }
                first = false;
            } else {
                // A new term: the stops of stopping jobs are sent again.
                self.stops_sent.clear();
                tracing::info!("scheduler: leading again");
            }
            // A new term reads everything again: another replica led meanwhile.
            self.live = None;
            let lead = self.lead(&mut lock, &mut pending_events).await;
            self.live = None;
            self.handle.withdraw();
            if !lead {
                return;
            }
            tracing::error!("scheduler: lost the leader lock (its database connection ended); stopped scheduling until it holds the lock again");
        }
    }

    /// Whether this process still holds the leader lock: on PostgreSQL its session must be
    /// alive (the lock ends with it); elsewhere there is one process.
    async fn still_leader(lock: &mut Option<sqlx::AnyConnection>) -> bool {
        let Some(conn) = lock.as_mut() else {
            return true;
        };
        let alive = tokio::time::timeout(
            Duration::from_secs(5),
            sqlx::query("SELECT 1").execute(&mut *conn),
        )
        .await;
        matches!(alive, Ok(Ok(_)))
    }

    /// Schedules while this process leads. Returns false when the executors' channel closed
    /// (the driver stops for good), true when the leader lock was lost: nothing more is
    /// scheduled, committed or stopped until it is held again.
    async fn lead(
        &mut self,
        lock: &mut Option<sqlx::AnyConnection>,
        pending_events: &mut Vec<ExecEvent>,
    ) -> bool {
        let tick = Duration::from_millis(self.cfg.tick_ms.max(10));
        let notify = self.handle.notify.clone();
        let mut failures = 0u32;
        let mut checked = Instant::now();
        loop {
            if checked.elapsed() >= Duration::from_secs(1) {
                checked = Instant::now();
                if !Self::still_leader(lock).await {
                    return true;
                }
            }
            if pending_events.is_empty() {
                tokio::select! {
                    _ = notify.notified() => {}
                    _ = tokio::time::sleep(tick) => {}
                    ev = self.rx.recv() => {
                        match ev {
                            Some(e) => pending_events.push(e),
                            None => return false,
                        }
                    }
                }
            }
            while pending_events.len() < 5000 {
                match self.rx.try_recv() {
                    Ok(e) => pending_events.push(e),
                    Err(_) => break,
                }
            }
            if !pending_events.is_empty() {
                match self.apply_events(pending_events).await {
                    Ok(()) => {
                        self.handle
                            .stats
                            .events
                            .fetch_add(pending_events.len() as u64, Ordering::Relaxed);
                        pending_events.clear();
                        failures = 0;
                    }
                    Err(e) => {
                        // Never dropped: what the executors saw (an exit, a stop) is the only
                        // record of it, and the job would hold its capacity until a restart.
                        // Retried with a growing pause (up to 5 s) until the store takes it.
                        failures = failures.saturating_add(1);
                        tracing::error!(error = %e, failures, count = pending_events.len(), "scheduler: committing executor events failed; retrying");
                        let pause = tick
                            .saturating_mul(1 << failures.min(6))
                            .min(Duration::from_secs(5));
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                }
            }
            if let Err(e) = self.cycle().await {
                tracing::error!(error = %e, "scheduler: cycle failed");
                tokio::time::sleep(tick).await;
            }
        }
    }

    /// On PostgreSQL, waits until this process holds the per-schema advisory lock.
    async fn leadership(&self) -> Option<sqlx::AnyConnection> {
        if self.store.dialect != Dialect::Postgres {
            return None;
        }
        let mut warned = false;
        loop {
            if let Ok(mut conn) = self.store.pool.acquire().await {
                let got: Result<i64, _> = sqlx::query_scalar(
                    "SELECT CASE WHEN pg_try_advisory_lock(hashtext('switchyard-scheduler:' || current_schema())) THEN 1 ELSE 0 END",
                )
                .fetch_one(&mut *conn)
                .await;
                if let Ok(1) = got {
                    // Detached: when the driver stops, the connection closes and the lock
                    // goes with it (a pooled one would keep holding it).
                    return Some(conn.detach());
                }
            }
            if !warned {
                tracing::info!("scheduler: another replica schedules this database; standing by");
                warned = true;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    fn executor(&self, kind: ExecutorKind) -> &Arc<dyn Executor> {
        match kind {
            ExecutorKind::Local => &self.local,
            ExecutorKind::Simulated => &self.sim,
        }
    }

    /// Hands the jobs that were with an executor before a restart back to it.
    async fn recover(&mut self) -> Result<(), sqlx::Error> {
        let rows = sqlx::query(
            "SELECT id, handle, started_at, admitted_at, stop_reason FROM jobs WHERE state IN ('starting', 'running', 'preempting') AND pool_id IS NOT NULL",
        )
        .fetch_all(&self.store.pool)
        .await?;
        if rows.is_empty() {
            return Ok(());
        }
        let now = self.store.now();
        let mut info = HashMap::new();
        for r in &rows {
            let id: String = r.try_get("id")?;
            let handle: Option<String> = r.try_get("handle")?;
            let started: Option<i64> = r.try_get("started_at")?;
            let admitted: Option<i64> = r.try_get("admitted_at")?;
            let stop: Option<StopReason> = opt_text_enum(r, "stop_reason")?;
            info.insert(id, (handle, started.or(admitted).unwrap_or(now), stop));
        }
        let ids: Vec<String> = info.keys().cloned().collect();
        let (launches, corrupt) = self.launches(&ids).await?;
        tracing::info!(
            jobs = launches.len(),
            "scheduler: adopting jobs after restart"
        );
        for (kind, launch) in launches {
            let (handle, started_at, stop) =
                info.remove(&launch.job_id).unwrap_or((None, now, None));
            self.executor(kind)
                .adopt(Adopt {
                    launch,
                    handle,
                    started_at,
                    stop,
                    now,
                })
                .await;
        }
        if !corrupt.is_empty() {
            self.apply_events(&corrupt).await?;
        }
        Ok(())
    }

    /// One scheduling cycle: snapshot (brought up to date, or read whole), core, commit,
    /// launch and stop. The snapshot is kept for the next cycle only when the cycle succeeds.
    async fn cycle(&mut self) -> Result<(), sqlx::Error> {
        let t0 = Instant::now();
        let min_runtime = self.cfg.min_runtime_ms;
        let generation = self.store.scheduling_generation();
        let now = self.store.now();
        let (mut live, rows) = match self.live.take() {
            Some(mut l) if !l.due_for_full_read() => {
                let rows = l.refresh(&self.store, now, min_runtime).await?;
                (l, Some(rows))
            }
            _ => (live::Live::full(&self.store, now, min_runtime).await?, None),
        };
        if rows == Some(live::Refreshed::Quiet) {
            return self.quiet_cycle(live, generation, t0).await;
        }
        let t_snapshot = t0.elapsed();
        live.loaded.snap.hold_after_ms =
            (self.cfg.hold_after_ms > 0).then_some(self.cfg.hold_after_ms);
        self.handle.publish(Summary::of(&live.loaded, generation));
        let t_summary = t0.elapsed();
        let decisions = core::schedule(&live.loaded.snap);
        let t_core = t0.elapsed();
        // Transitions are stamped after the load, so they never precede what the load saw
        // (a submit that committed while the snapshot was being read).
        let (admitted, preempted, waits) = self
            .commit(&live.loaded, &decisions, self.store.now())
            .await?;
        let mut settled = waits.is_empty() && decisions.admits.is_empty();
        live.set_wait(waits);
        let t_commit = t0.elapsed();
        let loaded = &live.loaded;
        let to_launch: Vec<String> = loaded
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Admitted && j.stop_reason.is_none())
            .map(|j| j.id.clone())
            .collect();
        let changed = !to_launch.is_empty() || !admitted.is_empty() || !preempted.is_empty();
        settled &= !changed && decisions.preempts.is_empty();
        if !admitted.is_empty() {
            self.hand_over(&admitted).await?;
        }
        if !to_launch.is_empty() {
            self.launch(&to_launch).await?;
        }
        // Stops: preemptions (new and after a restart), aborts, runtime limits. Each is sent
        // only once its intent is committed (`stop_reason`), so that a restart, which no longer
        // knows what was sent, ends the job as the stop decides and not as its exit code says.
        // A victim whose preemption did not commit (it changed meanwhile) is not stopped.
        let mut stops: Vec<(String, StopReason, ExecutorKind)> = Vec::new();
        for j in &loaded.jobs {
            let with_executor = matches!(
                j.state,
                JobState::Starting | JobState::Running | JobState::Preempting
            );
            let reason = if preempted.contains(&j.id) {
                Some(StopReason::Preempt)
            } else if !with_executor {
                None
            } else {
                j.stop_reason
            };
            if let Some(reason) = reason {
                if !self.stops_sent.contains(&j.id) {
                    stops.push((j.id.clone(), reason, loaded.executor_of(j)));
                }
            }
        }
        let over_time = self.runtime_limits(loaded, self.store.now()).await?;
        stops.extend(over_time);
        settled &= stops.is_empty();
        for (id, reason, executor) in stops {
            self.stops_sent.insert(id.clone());
            self.executor(executor)
                .stop(&id, reason, self.cfg.stop_grace_ms)
                .await;
        }
        // What this cycle committed, for the pages before the next cycle; unless the executors
        // have reported already (a simulated pool reports `running` as it is handed a job):
        // the driver then applies their events and cycles again at once, and that cycle's read
        // covers this one's commit too (each job row read once, not twice).
        if changed && self.rx.is_empty() {
            let generation = self.store.scheduling_generation();
            live.refresh(&self.store, self.store.now(), min_runtime)
                .await?;
            live.loaded.snap.hold_after_ms =
                (self.cfg.hold_after_ms > 0).then_some(self.cfg.hold_after_ms);
            self.handle.publish(Summary::of(&live.loaded, generation));
        }
        live.settle(settled, now);
        tracing::debug!(
            jobs = live.loaded.jobs.len(),
            rows_read = ?rows,
            snapshot_us = t_snapshot.as_micros() as u64,
            summary_us = (t_summary - t_snapshot).as_micros() as u64,
            core_us = (t_core - t_summary).as_micros() as u64,
            commit_us = (t_commit - t_core).as_micros() as u64,
            total_us = t0.elapsed().as_micros() as u64,
            "scheduler: cycle"
        );
        self.live = Some(live);
        let st = &self.handle.stats;
        st.record_cycle(t0.elapsed().as_micros() as u64, true);
        st.admitted
            .fetch_add(decisions.admits.len() as u64, Ordering::Relaxed);
        st.preempted
            .fetch_add(decisions.preempts.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// A cycle whose snapshot did not change since a settled one ([`live::Refreshed::Quiet`]):
    /// the core would decide as before, so only the runtime limits are checked, and the
    /// published counts, still true, are said to include the changes counted since.
    async fn quiet_cycle(
        &mut self,
        mut live: live::Live,
        generation: u64,
        t0: Instant,
    ) -> Result<(), sqlx::Error> {
        self.handle.renew_summary(generation);
        let over_time = self.runtime_limits(&live.loaded, self.store.now()).await?;
        if !over_time.is_empty() {
            live.settle(false, self.store.now());
        }
        for (id, reason, executor) in over_time {
            self.stops_sent.insert(id.clone());
            self.executor(executor)
                .stop(&id, reason, self.cfg.stop_grace_ms)
                .await;
        }
        self.live = Some(live);
        self.handle
            .stats
            .record_cycle(t0.elapsed().as_micros() as u64, false);
        Ok(())
    }

    /// Running jobs past their maximum runtime: marks them and returns their stops.
    async fn runtime_limits(
        &self,
        l: &Loaded,
        now: i64,
    ) -> Result<Vec<(String, StopReason, ExecutorKind)>, sqlx::Error> {
        let over: Vec<&LiveJob> = l
            .jobs
            .iter()
            .filter(|j| {
                j.state == JobState::Running
                    && j.stop_reason.is_none()
                    && matches!((j.started_at, j.max_runtime_ms), (Some(s), Some(m)) if now >= s + m)
            })
            .collect();
        if over.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.store.begin_write().await?;
        let mut events = Vec::new();
        let mut audits = Vec::new();
        let mut out = Vec::new();
        for j in over {
            let changed = sqlx::query(&format!("UPDATE jobs SET stop_reason = 'max_runtime', updated_at = $1, {} WHERE id = $2 AND state = 'running' AND stop_reason IS NULL", set_change(tx.dialect)))
                .bind(now)
                .bind(&j.id)
                .execute(&mut *tx.tx)
                .await?
                .rows_affected();
            if changed == 0 {
                continue;
            }
            let limit = j.max_runtime_ms.unwrap_or(0);
            events.push(EventRow {
                tenant_id: j.tenant_id.clone(),
                job_id: j.id.clone(),
                from: Some(JobState::Running),
                to: JobState::Running,
                detail: format!(
                    "reached its maximum runtime of {} s; stopping",
                    limit / 1000
                ),
            });
            audits.push(BatchRecord {
                tenant_id: j.tenant_id.clone(),
                action: "job.max_runtime",
                target_kind: "job",
                target_id: j.id.clone(),
                summary: json!({"name": j.name, "max_runtime_ms": limit}),
            });
            out.push((j.id.clone(), StopReason::MaxRuntime, l.executor_of(j)));
        }
        insert_events(&mut tx, now, &events).await?;
        self.audit(&mut tx, now, Chain::Scheduler, &audits).await?;
        tx.commit().await?;
        Ok(out)
    }
}
