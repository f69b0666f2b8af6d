//! The driver: runs the [`core`](super::core) on every relevant change (a poke after a submit,
//! an abort, a policy change, an executor event) and on a tick; commits its decisions; hands
//! admitted jobs to their pool's executor and stops the ones to preempt or abort; commits what
//! the executors report.
//!
//! Every transition is written in one transaction together with its `job_events` row and its
//! audit entry (actor `scheduler`); a cycle's transitions share one transaction. Nothing that
//! matters is held only in memory: the driver's only memory is which stops it already sent in
//! this process, and a restart re-sends them.
//!
//! # Restart
//! At start the driver hands every job the store has in `starting`, `running` or `preempting`
//! to its executor's [`adopt`](crate::nodes::executor::Executor::adopt) (which finds the process
//! again, reports its exit, or reports it lost), then re-sends the stops of `preempting` and
//! aborting jobs. An `admitted` job was never handed to an executor (the state `starting` is
//! committed before `launch`), so it is launched as usual. No job is lost or started twice.
//!
//! # One driver per database
//! On PostgreSQL several replicas may share the database; the driver takes a session advisory
//! lock (per schema) and only the holder schedules. The others wait and take over when it goes.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::sync::Notify;

use app::model::{format_gpus as gpus, PoolNode, RequestMeta};

use super::core::{self, Decisions, WaitReason};
use super::jobs::LIVE;
use crate::store::STATEMENT_PARAMS;
use crate::audit::{self, Actor, BatchRecord};
use crate::clock::now_ms;
use crate::nodes::executor::disabled::DisabledExecutor;
use crate::nodes::executor::local::LocalExecutor;
use crate::nodes::executor::sandbox::{self, JobUser};
use crate::nodes::executor::simulated::SimulatedExecutor;
use crate::nodes::executor::{
    AbortCallback, AbortKind, Adopt, Events, ExecEvent, Executor, Launch, StopReason,
};
use crate::store::{new_id, Dialect, Store, WriteTx};

/// What the driver needs from the configuration.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub tick_ms: u64,
    pub min_runtime_ms: i64,
    pub stop_grace_ms: i64,
    pub sim_checkpoint_ms: i64,
    pub jobs_dir: PathBuf,
    /// Pools with the `local` executor may be created (by platform admins) and run.
    pub allow_local_pools: bool,
    /// The unprivileged user and group local jobs run as.
    pub job_uid: u32,
    pub job_gid: u32,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            tick_ms: 1000,
            min_runtime_ms: 10_000,
            stop_grace_ms: 10_000,
            sim_checkpoint_ms: 2_000,
            jobs_dir: PathBuf::from("data/jobs"),
            allow_local_pools: false,
            job_uid: 65534,
            job_gid: 65534,
        }
    }
}

/// Lets request handlers wake the driver, and shows its counters.
#[derive(Clone, Default)]
pub struct SchedulerHandle {
    notify: Arc<Notify>,
    pub stats: Arc<Stats>,
}

#[derive(Default)]
pub struct Stats {
    pub cycles: AtomicU64,
    pub last_cycle_us: AtomicU64,
    pub admitted: AtomicU64,
    pub preempted: AtomicU64,
    pub events: AtomicU64,
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
    let (tx, rx) = unbounded_channel();
    let sim: Arc<dyn Executor> =
        Arc::new(SimulatedExecutor::new(tx.clone(), cfg.sim_checkpoint_ms));
    let local = local_executor(&cfg, tx);
    let mut d = Driver {
        store,
        cfg,
        handle,
        rx,
        sim,
        local,
        stops_sent: HashSet::new(),
        meta: RequestMeta {
            source_ip: String::new(),
            request_id: "scheduler".into(),
        },
        actor: Actor::system("scheduler"),
    };
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
    meta: RequestMeta,
    actor: Actor,
}

/// A live job as the driver loads it.
#[derive(Clone, Debug)]
pub(crate) struct LiveJob {
    pub(crate) id: String,
    pub(crate) tenant_id: String,
    pub(crate) name: String,
    pub(crate) queue_id: String,
    pub(crate) queue: Option<u32>,
    pub(crate) user_id: String,
    pub(crate) gpu_milli: i64,
    pub(crate) gpu_memory_mb: i64,
    pub(crate) priority: i64,
    pub(crate) preemptible: bool,
    pub(crate) state: String,
    pub(crate) wait_code: Option<String>,
    pub(crate) wait_reason: Option<String>,
    pub(crate) pool_id: Option<String>,
    pub(crate) node: Option<i64>,
    pub(crate) slices: Vec<(u32, u32)>,
    pub(crate) preempted_for: Option<String>,
    pub(crate) stop_reason: Option<String>,
    pub(crate) max_runtime_ms: Option<i64>,
    pub(crate) submitted_at: i64,
    pub(crate) admitted_at: Option<i64>,
    pub(crate) started_at: Option<i64>,
}

pub(crate) struct GroupInfo {
    pub(crate) id: String,
    pub(crate) tenant_id: String,
    pub(crate) name: String,
    pub(crate) exceed_users: Vec<String>,
}

/// The store's view turned into a core snapshot, with the ids to map decisions back.
pub(crate) struct Loaded {
    pub(crate) snap: core::Snapshot,
    pub(crate) pool_ids: Vec<String>,
    pub(crate) pool_names: Vec<String>,
    pub(crate) pool_executor: Vec<String>,
    pub(crate) node_names: Vec<Vec<String>>,
    pub(crate) groups: Vec<GroupInfo>,
    pub(crate) queue_group: Vec<u32>,
    /// Indexed by the core's job id.
    pub(crate) jobs: Vec<LiveJob>,
}

/// One `job_events` row waiting for a multi-row insert.
struct EventRow {
    tenant_id: String,
    job_id: String,
    from: Option<String>,
    to: String,
    detail: String,
}

fn plural(n: i64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// A waiting job's reason as a code and in plain words.
fn wait_words(r: &WaitReason, group: &str, job_gpus: i64) -> (&'static str, String) {
    match r {
        WaitReason::OverLimit { used, limit } => (
            "over_limit",
            format!(
                "{group} is using {} of its limit of {} GPUs; this job's {} GPUs would go over it. It starts when the group's other jobs finish.",
                gpus(*used as i64), gpus(*limit as i64), gpus(job_gpus)
            ),
        ),
        WaitReason::QuotaExhausted { used, reservation } => (
            "quota_exhausted",
            format!(
                "{group} is using {} of its {} reserved GPUs, and this job may not borrow idle GPUs beyond the reservation (over-quota is off for its queue, group or user, or its priority class is not preemptible).",
                gpus(*used as i64), gpus(*reservation as i64)
            ),
        ),
        WaitReason::NoCapacity => (
            "no_capacity",
            format!(
                "Within {group}'s reservation, but no node of the queue's pools has {} GPUs free and nothing borrowed can be reclaimed yet (borrowers that started less than the minimum runtime ago are protected). It starts when capacity frees up.",
                gpus(job_gpus)
            ),
        ),
        WaitReason::WaitingForPreemption { victims } => (
            "reclaiming",
            format!(
                "Reclaiming {group}'s reserved GPUs: {} of other groups that borrowed them {} being stopped (checkpoint, then stop). It starts as soon as they have.",
                plural(victims.len() as i64, "over-quota job", "over-quota jobs"),
                if victims.len() == 1 { "is" } else { "are" }
            ),
        ),
        WaitReason::NoIdleCapacity => (
            "no_idle_capacity",
            format!(
                "{group} is at or beyond its reservation, so this job borrows idle GPUs, and none are idle for it now (idle GPUs go first to the borrowing groups with the smallest share for their weight)."
            ),
        ),
        WaitReason::Unschedulable => (
            "unschedulable",
            "This request cannot be placed on any node of the queue's pools.".to_string(),
        ),
    }
}

fn placeholders(start: usize, n: usize) -> String {
    (start..start + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}


/// `(v1, v2, …), (…)` for `rows` rows of `arity` parameters, numbered from `$start`.
fn value_rows(start: usize, rows: usize, arity: usize) -> String {
    (0..rows)
        .map(|r| format!("({})", placeholders(start + r * arity, arity)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One admission's new columns.
struct AdmitRow {
    id: String,
    pool_id: String,
    node: i64,
    node_name: String,
    slices: String,
    over_quota: i64,
}

/// Marks queued jobs admitted in multi-row `UPDATE … FROM (VALUES …)` statements; returns
/// the ids that were still queued (and so changed).
async fn admit_rows(
    tx: &mut WriteTx,
    now: i64,
    rows: &[AdmitRow],
) -> Result<std::collections::HashSet<String>, sqlx::Error> {
    let mut changed = std::collections::HashSet::new();
    for chunk in rows.chunks(STATEMENT_PARAMS / 6) {
        let sql = format!(
            "UPDATE jobs SET state = 'admitted', pool_id = v.column2, node = v.column3, node_name = v.column4, slices = v.column5, over_quota = v.column6,
                admitted_at = $1, wait_code = NULL, wait_reason = NULL, updated_at = $1
             FROM (VALUES {}) AS v
             WHERE jobs.id = v.column1 AND jobs.state = 'queued' AND jobs.stop_reason IS NULL RETURNING id",
            value_rows(2, chunk.len(), 6)
        );
        let mut q = sqlx::query(&sql).bind(now);
        for r in chunk {
            q = q
                .bind(&r.id)
                .bind(&r.pool_id)
                .bind(r.node)
                .bind(&r.node_name)
                .bind(&r.slices)
                .bind(r.over_quota);
        }
        for row in q.fetch_all(&mut *tx.tx).await? {
            changed.insert(row.try_get::<String, _>("id")?);
        }
    }
    Ok(changed)
}

/// Writes the `running` transitions gathered so far (job id, handle, state it leaves).
async fn flush_running(
    tx: &mut WriteTx,
    now: i64,
    pending: &mut Vec<(String, String, String)>,
) -> Result<(), sqlx::Error> {
    for chunk in pending.chunks(STATEMENT_PARAMS / 3) {
        let sql = format!(
            "UPDATE jobs SET state = 'running', handle = v.column2, started_at = $1, updated_at = $1
             FROM (VALUES {}) AS v WHERE jobs.id = v.column1 AND jobs.state = v.column3",
            value_rows(2, chunk.len(), 3)
        );
        let mut q = sqlx::query(&sql).bind(now);
        for (id, handle, from) in chunk {
            q = q.bind(id).bind(handle).bind(from);
        }
        q.execute(&mut *tx.tx).await?;
    }
    pending.clear();
    Ok(())
}

async fn insert_events(tx: &mut WriteTx, at: i64, rows: &[EventRow]) -> Result<(), sqlx::Error> {
    for chunk in rows.chunks(STATEMENT_PARAMS / 7) {
        let values = (0..chunk.len())
            .map(|i| {
                let b = i * 7 + 1;
                format!(
                    "(${}, ${}, ${}, ${}, ${}, ${}, ${})",
                    b,
                    b + 1,
                    b + 2,
                    b + 3,
                    b + 4,
                    b + 5,
                    b + 6
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("INSERT INTO job_events (id, tenant_id, job_id, at, from_state, to_state, detail) VALUES {values}");
        let mut q = sqlx::query(&sql);
        for r in chunk {
            q = q
                .bind(new_id())
                .bind(r.tenant_id.clone())
                .bind(r.job_id.clone())
                .bind(at)
                .bind(r.from.clone())
                .bind(r.to.clone())
                .bind(r.detail.clone());
        }
        q.execute(&mut *tx.tx).await?;
    }
    Ok(())
}

fn live_job(r: &AnyRow, queue_index: &HashMap<String, u32>) -> Result<LiveJob, sqlx::Error> {
    let queue_id: String = r.try_get("queue_id")?;
    let slices: Option<String> = r.try_get("slices")?;
    Ok(LiveJob {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        name: r.try_get("name")?,
        queue: queue_index.get(&queue_id).copied(),
        queue_id,
        user_id: r.try_get("user_id")?,
        gpu_milli: r.try_get("gpu_milli")?,
        gpu_memory_mb: r.try_get("gpu_memory_mb")?,
        priority: r.try_get("priority")?,
        preemptible: r.try_get::<i64, _>("preemptible")? != 0,
        state: r.try_get("state")?,
        wait_code: r.try_get("wait_code")?,
        wait_reason: r.try_get("wait_reason")?,
        pool_id: r.try_get("pool_id")?,
        node: r.try_get("node")?,
        slices: slices
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default(),
        preempted_for: r.try_get("preempted_for")?,
        stop_reason: r.try_get("stop_reason")?,
        max_runtime_ms: r.try_get("max_runtime_ms")?,
        submitted_at: r.try_get("submitted_at")?,
        admitted_at: r.try_get("admitted_at")?,
        started_at: r.try_get("started_at")?,
    })
}

/// Reads pools, policies, queues and live jobs into a core snapshot.
pub(crate) async fn load(
    store: &Store,
    now: i64,
    min_runtime_ms: i64,
) -> Result<Loaded, sqlx::Error> {
    let pool_rows = sqlx::query("SELECT id, name, executor, nodes FROM pools ORDER BY id")
        .fetch_all(&store.pool)
        .await?;
    let mut snap = core::Snapshot {
        now,
        min_runtime_ms,
        ..Default::default()
    };
    let mut pool_ids = Vec::new();
    let mut pool_names = Vec::new();
    let mut pool_executor = Vec::new();
    let mut node_names = Vec::new();
    let mut pool_index = HashMap::new();
    for r in &pool_rows {
        let id: String = r.try_get("id")?;
        let nodes: Vec<PoolNode> =
            serde_json::from_str(&r.try_get::<String, _>("nodes")?).unwrap_or_default();
        pool_index.insert(id.clone(), pool_ids.len() as u32);
        snap.pools.push(core::Pool {
            nodes: nodes
                .iter()
                .map(|n| core::Node {
                    devices: (0..n.gpus)
                        .map(|_| core::Device {
                            memory_mb: n.gpu_memory_mb,
                        })
                        .collect(),
                })
                .collect(),
        });
        node_names.push(nodes.iter().map(|n| n.name.clone()).collect());
        pool_ids.push(id);
        pool_names.push(r.try_get("name")?);
        pool_executor.push(r.try_get("executor")?);
    }
    let policy_rows = sqlx::query(
        "SELECT p.id, p.tenant_id, p.group_id, g.name AS group_name, p.reservation_milli, p.limit_milli, p.over_quota_weight, p.over_quota_allowed, p.exceed_users
         FROM policies p JOIN groups g ON g.id = p.group_id ORDER BY p.id",
    )
    .fetch_all(&store.pool)
    .await?;
    let mut policy_group = HashMap::new();
    let mut groups = Vec::new();
    for r in &policy_rows {
        let clamp = |v: i64| v.clamp(0, u32::MAX as i64) as u32;
        policy_group.insert(r.try_get::<String, _>("id")?, groups.len() as u32);
        snap.groups.push(core::GroupPolicy {
            reservation: clamp(r.try_get("reservation_milli")?),
            limit: clamp(r.try_get("limit_milli")?),
            over_quota_weight: clamp(r.try_get("over_quota_weight")?).max(1),
            over_quota_allowed: r.try_get::<i64, _>("over_quota_allowed")? != 0,
        });
        groups.push(GroupInfo {
            id: r.try_get("group_id")?,
            tenant_id: r.try_get("tenant_id")?,
            name: r.try_get("group_name")?,
            exceed_users: serde_json::from_str(&r.try_get::<String, _>("exceed_users")?)
                .unwrap_or_default(),
        });
    }
    let queue_rows = sqlx::query("SELECT id, policy_id, pools, over_quota FROM queues ORDER BY id")
        .fetch_all(&store.pool)
        .await?;
    let mut queue_index = HashMap::new();
    let mut queue_group = Vec::new();
    for r in &queue_rows {
        let Some(&g) = policy_group.get(&r.try_get::<String, _>("policy_id")?) else {
            continue;
        };
        let pools: Vec<String> =
            serde_json::from_str(&r.try_get::<String, _>("pools")?).unwrap_or_default();
        queue_index.insert(r.try_get::<String, _>("id")?, snap.queues.len() as u32);
        queue_group.push(g);
        snap.queues.push(core::Queue {
            group: g,
            pools: pools
                .iter()
                .filter_map(|p| pool_index.get(p).copied())
                .collect(),
            over_quota: r.try_get::<i64, _>("over_quota")? != 0,
        });
    }
    let group_index: HashMap<&str, u32> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.id.as_str(), i as u32))
        .collect();
    let job_rows = sqlx::query(
        "SELECT id, tenant_id, name, queue_id, user_id, gpu_milli, gpu_memory_mb, priority, preemptible, state, wait_code, wait_reason, pool_id, node, slices,
            preempted_for, stop_reason, max_runtime_ms, submitted_at, admitted_at, started_at
         FROM jobs WHERE state IN ('queued', 'admitted', 'starting', 'running', 'preempting') ORDER BY submitted_at, id",
    )
    .fetch_all(&store.pool)
    .await?;
    let mut jobs = Vec::with_capacity(job_rows.len());
    for r in &job_rows {
        let j = live_job(r, &queue_index)?;
        let idx = jobs.len() as u64;
        let clamp = |v: i64| v.clamp(0, u32::MAX as i64) as u32;
        if let Some(q) = j.queue {
            if j.state == "queued" {
                if j.stop_reason.is_none() {
                    let g = &groups[queue_group[q as usize] as usize];
                    snap.pending.push(core::PendingJob {
                        id: idx,
                        queue: q,
                        priority: j.priority as i32,
                        preemptible: j.preemptible,
                        may_exceed: g.exceed_users.is_empty()
                            || g.exceed_users.contains(&j.user_id),
                        gpus: clamp(j.gpu_milli),
                        memory_mb: clamp(j.gpu_memory_mb),
                        submitted_at: j.submitted_at,
                    });
                }
            } else if let (Some(pool), Some(node)) =
                (j.pool_id.as_ref().and_then(|p| pool_index.get(p)), j.node)
            {
                snap.running.push(core::RunningJob {
                    id: idx,
                    queue: q,
                    priority: j.priority as i32,
                    preemptible: j.preemptible,
                    gpus: clamp(j.gpu_milli),
                    memory_mb: clamp(j.gpu_memory_mb),
                    placement: core::Placement {
                        pool: *pool,
                        node: node as u32,
                        slices: j.slices.clone(),
                    },
                    started_at: j.started_at.or(j.admitted_at).unwrap_or(now),
                    preempted_for: j
                        .preempted_for
                        .as_deref()
                        .and_then(|g| group_index.get(g).copied()),
                });
            }
        }
        jobs.push(j);
    }
    Ok(Loaded {
        snap,
        pool_ids,
        pool_names,
        pool_executor,
        node_names,
        groups,
        queue_group,
        jobs,
    })
}

impl Driver {
    async fn run(&mut self) {
        let _lock = self.leadership().await;
        if let Err(e) = self.recover().await {
            tracing::error!(error = %e, "scheduler: restart recovery failed");
        }
        let tick = Duration::from_millis(self.cfg.tick_ms.max(10));
        let notify = self.handle.notify.clone();
        let mut pending_events: Vec<ExecEvent> = Vec::new();
        let mut failures = 0u32;
        loop {
            if pending_events.is_empty() {
                tokio::select! {
                    _ = notify.notified() => {}
                    _ = tokio::time::sleep(tick) => {}
                    ev = self.rx.recv() => {
                        match ev {
                            Some(e) => pending_events.push(e),
                            None => return,
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
                match self.apply_events(&pending_events).await {
                    Ok(()) => {
                        self.handle
                            .stats
                            .events
                            .fetch_add(pending_events.len() as u64, Ordering::Relaxed);
                        pending_events.clear();
                        failures = 0;
                    }
                    Err(e) => {
                        failures += 1;
                        tracing::error!(error = %e, failures, "scheduler: committing executor events failed");
                        if failures >= 5 {
                            tracing::error!(count = pending_events.len(), "scheduler: dropping executor events after repeated failures; the jobs are recovered on the next restart");
                            pending_events.clear();
                            failures = 0;
                        }
                        tokio::time::sleep(tick).await;
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

    fn executor(&self, kind: &str) -> &Arc<dyn Executor> {
        if kind == "local" {
            &self.local
        } else {
            &self.sim
        }
    }

    async fn launches(&self, ids: &[String]) -> Result<Vec<(String, Launch)>, sqlx::Error> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(STATEMENT_PARAMS) {
            let sql = format!(
                "SELECT j.id, j.command, j.image, j.env, j.checkpoint_dir, j.abort_kind, j.abort_command, j.abort_timeout_ms, j.duration_ms, j.resume_count,
                    j.node_name, j.slices, j.handle, j.started_at, j.admitted_at, p.executor
                 FROM jobs j JOIN pools p ON p.id = j.pool_id WHERE j.id IN ({})",
                placeholders(1, chunk.len())
            );
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(id.clone());
            }
            for r in q.fetch_all(&self.store.pool).await? {
                let env: std::collections::BTreeMap<String, String> =
                    serde_json::from_str(&r.try_get::<String, _>("env")?).unwrap_or_default();
                let slices: Option<String> = r.try_get("slices")?;
                let abort = match (
                    r.try_get::<Option<String>, _>("abort_kind")?,
                    r.try_get::<Option<String>, _>("abort_command")?,
                ) {
                    (Some(kind), Some(command)) => Some(AbortCallback {
                        kind: if kind == "python" {
                            AbortKind::Python
                        } else {
                            AbortKind::Bash
                        },
                        command,
                        timeout_ms: r.try_get("abort_timeout_ms")?,
                    }),
                    _ => None,
                };
                out.push((
                    r.try_get::<String, _>("executor")?,
                    Launch {
                        job_id: r.try_get("id")?,
                        resume_count: r.try_get("resume_count")?,
                        command: r.try_get("command")?,
                        image: r.try_get("image")?,
                        env: env.into_iter().collect(),
                        checkpoint_dir: r.try_get("checkpoint_dir")?,
                        abort,
                        node: r
                            .try_get::<Option<String>, _>("node_name")?
                            .unwrap_or_default(),
                        devices: slices
                            .and_then(|s| serde_json::from_str(&s).ok())
                            .unwrap_or_default(),
                        duration_ms: r.try_get("duration_ms")?,
                    },
                ));
            }
        }
        Ok(out)
    }

    /// Hands the jobs that were with an executor before a restart back to it.
    async fn recover(&mut self) -> Result<(), sqlx::Error> {
        let rows = sqlx::query(
            "SELECT id, handle, started_at, admitted_at FROM jobs WHERE state IN ('starting', 'running', 'preempting') AND pool_id IS NOT NULL",
        )
        .fetch_all(&self.store.pool)
        .await?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut info = HashMap::new();
        for r in &rows {
            let id: String = r.try_get("id")?;
            let handle: Option<String> = r.try_get("handle")?;
            let started: Option<i64> = r.try_get("started_at")?;
            let admitted: Option<i64> = r.try_get("admitted_at")?;
            info.insert(id, (handle, started.or(admitted).unwrap_or_else(now_ms)));
        }
        let ids: Vec<String> = info.keys().cloned().collect();
        let launches = self.launches(&ids).await?;
        tracing::info!(
            jobs = launches.len(),
            "scheduler: adopting jobs after restart"
        );
        for (kind, launch) in launches {
            let (handle, started_at) = info.remove(&launch.job_id).unwrap_or((None, now_ms()));
            self.executor(&kind)
                .adopt(Adopt {
                    launch,
                    handle,
                    started_at,
                })
                .await;
        }
        Ok(())
    }

    /// One scheduling cycle: snapshot, core, commit, launch and stop.
    async fn cycle(&mut self) -> Result<(), sqlx::Error> {
        let t0 = Instant::now();
        let now = now_ms();
        let loaded = load(&self.store, now, self.cfg.min_runtime_ms).await?;
        let decisions = core::schedule(&loaded.snap);
        // Transitions are stamped after the load, so they never precede what the load saw
        // (a submit that committed while the snapshot was being read).
        let admitted = self.commit(&loaded, &decisions, now_ms()).await?;
        let to_launch: Vec<String> = loaded
            .jobs
            .iter()
            .filter(|j| j.state == "admitted" && j.stop_reason.is_none())
            .map(|j| j.id.clone())
            .chain(admitted)
            .collect();
        if !to_launch.is_empty() {
            self.launch(&to_launch).await?;
        }
        // Stops: preemptions (new and after a restart), aborts, runtime limits.
        let mut stops: Vec<(String, StopReason, String)> = Vec::new();
        let victims: HashSet<u64> = decisions.preempts.iter().map(|p| p.victim).collect();
        for (i, j) in loaded.jobs.iter().enumerate() {
            let executor = j
                .pool_id
                .as_ref()
                .and_then(|p| loaded.pool_ids.iter().position(|x| x == p))
                .map(|i| loaded.pool_executor[i].clone())
                .unwrap_or_default();
            let with_executor = matches!(j.state.as_str(), "starting" | "running" | "preempting");
            let reason = if victims.contains(&(i as u64)) {
                Some(StopReason::Preempt)
            } else if !with_executor {
                None
            } else {
                match j.stop_reason.as_deref() {
                    Some("preempt") => Some(StopReason::Preempt),
                    Some("abort") => Some(StopReason::Abort),
                    Some("max_runtime") => Some(StopReason::MaxRuntime),
                    _ => None,
                }
            };
            if let Some(reason) = reason {
                if !self.stops_sent.contains(&j.id) {
                    stops.push((j.id.clone(), reason, executor));
                }
            }
        }
        let over_time = self.runtime_limits(&loaded, now_ms()).await?;
        stops.extend(over_time);
        for (id, reason, executor) in stops {
            self.stops_sent.insert(id.clone());
            self.executor(&executor)
                .stop(&id, reason, self.cfg.stop_grace_ms)
                .await;
        }
        let st = &self.handle.stats;
        st.cycles.fetch_add(1, Ordering::Relaxed);
        st.last_cycle_us
            .store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
        st.admitted
            .fetch_add(decisions.admits.len() as u64, Ordering::Relaxed);
        st.preempted
            .fetch_add(decisions.preempts.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Commits admissions, preemptions and wait reasons in one transaction with their events
    /// and audit entries. Returns the ids admitted.
    async fn commit(
        &self,
        l: &Loaded,
        d: &Decisions,
        now: i64,
    ) -> Result<Vec<String>, sqlx::Error> {
        let mut wait_updates = Vec::new();
        for (job, reason) in &d.waiting {
            let j = &l.jobs[*job as usize];
            let group = j
                .queue
                .map(|q| l.groups[l.queue_group[q as usize] as usize].name.as_str())
                .unwrap_or("the group");
            let (code, text) = wait_words(reason, group, j.gpu_milli);
            if j.wait_code.as_deref() != Some(code) || j.wait_reason.as_deref() != Some(&text) {
                wait_updates.push((j.id.clone(), code, text));
            }
        }
        if d.admits.is_empty() && d.preempts.is_empty() && wait_updates.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.store.begin_write().await?;
        let mut events = Vec::new();
        let mut audits = Vec::new();
        let mut admitted = Vec::new();
        let rows: Vec<AdmitRow> = d
            .admits
            .iter()
            .map(|a| {
                let pool = a.placement.pool as usize;
                AdmitRow {
                    id: l.jobs[a.job as usize].id.clone(),
                    pool_id: l.pool_ids[pool].clone(),
                    node: a.placement.node as i64,
                    node_name: l.node_names[pool]
                        .get(a.placement.node as usize)
                        .cloned()
                        .unwrap_or_default(),
                    slices: serde_json::to_string(&a.placement.slices)
                        .unwrap_or_else(|_| "[]".into()),
                    over_quota: i64::from(a.over_quota),
                }
            })
            .collect();
        let changed = admit_rows(&mut tx, now, &rows).await?;
        for (a, row) in d.admits.iter().zip(&rows) {
            let j = &l.jobs[a.job as usize];
            let pool = a.placement.pool as usize;
            if !changed.contains(&row.id) {
                continue;
            }
            let node_name = row.node_name.clone();
            let detail = format!(
                "admitted to {} on {}{}",
                l.pool_names[pool],
                node_name,
                if a.over_quota {
                    " (over quota: borrowing idle GPUs, may be preempted)"
                } else {
                    ""
                }
            );
            events.push(EventRow {
                tenant_id: j.tenant_id.clone(),
                job_id: j.id.clone(),
                from: Some("queued".into()),
                to: "admitted".into(),
                detail,
            });
            audits.push(BatchRecord {
                tenant_id: j.tenant_id.clone(),
                action: "job.admit",
                target_kind: "job",
                target_id: j.id.clone(),
                summary: json!({"name": j.name, "pool": l.pool_names[pool], "node": node_name, "gpu_milli": j.gpu_milli, "over_quota": a.over_quota}),
            });
            admitted.push(j.id.clone());
        }
        for p in &d.preempts {
            let v = &l.jobs[p.victim as usize];
            let f = &l.jobs[p.for_job as usize];
            let for_group = &l.groups[p.for_group as usize];
            let victim_group = &l.groups[p.victim_group as usize];
            let changed = sqlx::query(
                "UPDATE jobs SET state = 'preempting', stop_reason = 'preempt', preempted_for = $1, updated_at = $2
                 WHERE id = $3 AND state IN ('admitted', 'starting', 'running') AND stop_reason IS NULL",
            )
            .bind(&for_group.id)
            .bind(now)
            .bind(&v.id)
            .execute(&mut *tx.tx)
            .await?
            .rows_affected();
            if changed == 0 {
                continue;
            }
            let same_tenant = for_group.tenant_id == v.tenant_id;
            let for_name = if same_tenant {
                for_group.name.clone()
            } else {
                "a group of another organization".to_string()
            };
            let reason = format!(
                "{} was borrowing idle GPUs beyond its reservation; {} needs its reserved GPUs back",
                victim_group.name, for_name
            );
            sqlx::query(
                "INSERT INTO preemptions (id, at, pool_id, victim_tenant_id, victim_job_id, victim_group_id, for_tenant_id, for_job_id, for_group_id, gpu_milli, reason)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(new_id())
            .bind(now)
            .bind(v.pool_id.clone().unwrap_or_default())
            .bind(&v.tenant_id)
            .bind(&v.id)
            .bind(&victim_group.id)
            .bind(&f.tenant_id)
            .bind(&f.id)
            .bind(&for_group.id)
            .bind(v.gpu_milli)
            .bind(&reason)
            .execute(&mut *tx.tx)
            .await?;
            events.push(EventRow {
                tenant_id: v.tenant_id.clone(),
                job_id: v.id.clone(),
                from: Some(v.state.clone()),
                to: "preempting".into(),
                detail: format!("preempting: {reason}; running its abort callback, then stopping"),
            });
            audits.push(BatchRecord {
                tenant_id: v.tenant_id.clone(),
                action: "job.preempt",
                target_kind: "job",
                target_id: v.id.clone(),
                summary: json!({"name": v.name, "group": victim_group.name, "for_group": for_name, "gpu_milli": v.gpu_milli}),
            });
        }
        for (id, code, text) in &wait_updates {
            sqlx::query(
                "UPDATE jobs SET wait_code = $1, wait_reason = $2 WHERE id = $3 AND state = 'queued'",
            )
            .bind(*code)
            .bind(text)
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
        }
        insert_events(&mut tx, now, &events).await?;
        audit::append_many(&mut tx, now, &self.actor, &self.meta, &audits).await?;
        tx.commit().await?;
        Ok(admitted)
    }

    /// Marks admitted jobs `starting` (one transaction) and hands them to their executors.
    async fn launch(&mut self, ids: &[String]) -> Result<(), sqlx::Error> {
        let now = now_ms();
        let mut started = Vec::new();
        let mut tx = self.store.begin_write().await?;
        for chunk in ids.chunks(STATEMENT_PARAMS) {
            let sql = format!(
                "UPDATE jobs SET state = 'starting', updated_at = $1 WHERE state = 'admitted' AND stop_reason IS NULL AND id IN ({}) RETURNING id, tenant_id, name",
                placeholders(2, chunk.len())
            );
            let mut q = sqlx::query(&sql).bind(now);
            for id in chunk {
                q = q.bind(id.clone());
            }
            for r in q.fetch_all(&mut *tx.tx).await? {
                started.push((
                    r.try_get::<String, _>("id")?,
                    r.try_get::<String, _>("tenant_id")?,
                    r.try_get::<String, _>("name")?,
                ));
            }
        }
        if started.is_empty() {
            return Ok(());
        }
        let events: Vec<EventRow> = started
            .iter()
            .map(|(id, t, _)| EventRow {
                tenant_id: t.clone(),
                job_id: id.clone(),
                from: Some("admitted".into()),
                to: "starting".into(),
                detail: "handed to the pool's executor".into(),
            })
            .collect();
        let audits: Vec<BatchRecord> = started
            .iter()
            .map(|(id, t, name)| BatchRecord {
                tenant_id: t.clone(),
                action: "job.start",
                target_kind: "job",
                target_id: id.clone(),
                summary: json!({"name": name}),
            })
            .collect();
        insert_events(&mut tx, now, &events).await?;
        audit::append_many(&mut tx, now, &self.actor, &self.meta, &audits).await?;
        tx.commit().await?;
        let ids: Vec<String> = started.into_iter().map(|(id, _, _)| id).collect();
        for (kind, launch) in self.launches(&ids).await? {
            self.executor(&kind).launch(launch).await;
        }
        Ok(())
    }

    /// Running jobs past their maximum runtime: marks them and returns their stops.
    async fn runtime_limits(
        &self,
        l: &Loaded,
        now: i64,
    ) -> Result<Vec<(String, StopReason, String)>, sqlx::Error> {
        let over: Vec<&LiveJob> = l
            .jobs
            .iter()
            .filter(|j| {
                j.state == "running"
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
            let changed = sqlx::query("UPDATE jobs SET stop_reason = 'max_runtime', updated_at = $1 WHERE id = $2 AND state = 'running' AND stop_reason IS NULL")
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
                from: Some("running".into()),
                to: "running".into(),
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
            let executor = j
                .pool_id
                .as_ref()
                .and_then(|p| l.pool_ids.iter().position(|x| x == p))
                .map(|i| l.pool_executor[i].clone())
                .unwrap_or_default();
            out.push((j.id.clone(), StopReason::MaxRuntime, executor));
        }
        insert_events(&mut tx, now, &events).await?;
        audit::append_many(&mut tx, now, &self.actor, &self.meta, &audits).await?;
        tx.commit().await?;
        Ok(out)
    }

    /// Commits what the executors reported, in one transaction.
    async fn apply_events(&mut self, evs: &[ExecEvent]) -> Result<(), sqlx::Error> {
        let now = now_ms();
        let mut ids: Vec<String> = evs.iter().map(|e| event_job(e).to_string()).collect();
        ids.sort_unstable();
        ids.dedup();
        // Current state of each job, updated as the events apply in order.
        let mut jobs: HashMap<String, EventJob> = HashMap::new();
        for chunk in ids.chunks(STATEMENT_PARAMS) {
            let sql = format!(
                "SELECT id, tenant_id, name, state, stop_reason, resume_count, started_at FROM jobs WHERE id IN ({})",
                placeholders(1, chunk.len())
            );
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(id.clone());
            }
            for r in q.fetch_all(&self.store.pool).await? {
                jobs.insert(
                    r.try_get("id")?,
                    (
                        r.try_get("tenant_id")?,
                        r.try_get("name")?,
                        r.try_get("state")?,
                        r.try_get("stop_reason")?,
                        r.try_get("resume_count")?,
                        r.try_get("started_at")?,
                    ),
                );
            }
        }
        let mut tx = self.store.begin_write().await?;
        let mut events = Vec::new();
        let mut audits = Vec::new();
        let mut changed_any = false;
        // `running` transitions are written together; any other write first flushes them,
        // so the statements still apply in event order.
        let mut running: Vec<(String, String, String)> = Vec::new();
        for ev in evs {
            let id = event_job(ev);
            let Some((tenant, name, state, stop_reason, resume_count, started_at)) =
                jobs.get_mut(id)
            else {
                continue;
            };
            if !matches!(ev, ExecEvent::Running { .. }) && !running.is_empty() {
                flush_running(&mut tx, now, &mut running).await?;
            }
            let live = LIVE.contains(&state.as_str()) && state != "queued";
            // (new state, detail, audit action, exit code) for a transition.
            let mut transition: Option<(String, String, &'static str, Option<i64>)> = None;
            match ev {
                ExecEvent::Running { handle, .. } => {
                    if state == "admitted" || state == "starting" {
                        running.push((id.to_string(), handle.clone(), state.clone()));
                        events.push(EventRow {
                            tenant_id: tenant.clone(),
                            job_id: id.to_string(),
                            from: Some(state.clone()),
                            to: "running".into(),
                            detail: format!("running ({handle})"),
                        });
                        audits.push(BatchRecord {
                            tenant_id: tenant.clone(),
                            action: "job.running",
                            target_kind: "job",
                            target_id: id.to_string(),
                            summary: json!({"name": name, "handle": handle}),
                        });
                        *state = "running".into();
                        *started_at = Some(now);
                        changed_any = true;
                    } else if live {
                        // Already being stopped: keep the handle so a restart can find it.
                        flush_running(&mut tx, now, &mut running).await?;
                        sqlx::query("UPDATE jobs SET handle = $1, started_at = COALESCE(started_at, $2) WHERE id = $3")
                            .bind(handle)
                            .bind(now)
                            .bind(id)
                            .execute(&mut *tx.tx)
                            .await?;
                    }
                }
                ExecEvent::Exited { code, .. } if live => {
                    let (to, action) = if *code == 0 {
                        ("succeeded", "job.succeeded")
                    } else {
                        ("failed", "job.failed")
                    };
                    transition = Some((
                        to.into(),
                        format!("exited with code {code}"),
                        action,
                        Some(*code as i64),
                    ));
                }
                ExecEvent::Stopped {
                    checkpointed,
                    detail,
                    ..
                } if live => match stop_reason.as_deref() {
                    Some("preempt") => {
                        let n = *resume_count + 1;
                        sqlx::query(
                            "UPDATE jobs SET state = 'queued', resume_count = $1, pool_id = NULL, node = NULL, node_name = NULL, slices = NULL, over_quota = 0,
                                stop_reason = NULL, preempted_for = NULL, handle = NULL, admitted_at = NULL, started_at = NULL, queued_at = $2, updated_at = $2,
                                wait_code = NULL, wait_reason = NULL WHERE id = $3 AND state = $4",
                        )
                        .bind(n)
                        .bind(now)
                        .bind(id)
                        .bind(state.as_str())
                        .execute(&mut *tx.tx)
                        .await?;
                        events.push(EventRow {
                            tenant_id: tenant.clone(),
                            job_id: id.to_string(),
                            from: Some(state.clone()),
                            to: "preempted".into(),
                            detail: detail.clone(),
                        });
                        events.push(EventRow {
                            tenant_id: tenant.clone(),
                            job_id: id.to_string(),
                            from: Some("preempted".into()),
                            to: "queued".into(),
                            detail: format!(
                                "requeued to resume{} (attempt {})",
                                if *checkpointed {
                                    " from its checkpoint"
                                } else {
                                    ""
                                },
                                n + 1
                            ),
                        });
                        audits.push(BatchRecord {
                            tenant_id: tenant.clone(),
                            action: "job.requeue",
                            target_kind: "job",
                            target_id: id.to_string(),
                            summary: json!({"name": name, "checkpointed": checkpointed, "resume_count": n}),
                        });
                        *state = "queued".into();
                        *stop_reason = None;
                        *resume_count = n;
                        self.stops_sent.remove(id);
                        changed_any = true;
                    }
                    Some("abort") => {
                        transition = Some(("aborted".into(), detail.clone(), "job.aborted", None));
                    }
                    Some("max_runtime") => {
                        transition = Some((
                            "failed".into(),
                            format!("exceeded its maximum runtime: {detail}"),
                            "job.failed",
                            None,
                        ));
                    }
                    _ => {
                        transition = Some((
                            "lost".into(),
                            format!("stopped without a request: {detail}"),
                            "job.lost",
                            None,
                        ));
                    }
                },
                ExecEvent::Lost { reason, .. } if live => {
                    transition = Some(("lost".into(), reason.clone(), "job.lost", None));
                }
                _ => {}
            }
            if let Some((to, detail, action, code)) = transition {
                let duration = started_at.map(|s| now - s);
                sqlx::query("UPDATE jobs SET state = $1, exit_code = $2, detail = $3, finished_at = $4, updated_at = $4, handle = NULL WHERE id = $5 AND state = $6")
                    .bind(&to)
                    .bind(code)
                    .bind(&detail)
                    .bind(now)
                    .bind(id)
                    .bind(state.as_str())
                    .execute(&mut *tx.tx)
                    .await?;
                events.push(EventRow {
                    tenant_id: tenant.clone(),
                    job_id: id.to_string(),
                    from: Some(state.clone()),
                    to: to.clone(),
                    detail: detail.clone(),
                });
                audits.push(BatchRecord {
                    tenant_id: tenant.clone(),
                    action,
                    target_kind: "job",
                    target_id: id.to_string(),
                    summary: json!({"name": name, "detail": detail, "ran_ms": duration}),
                });
                *state = to;
                self.stops_sent.remove(id);
                changed_any = true;
            }
        }
        flush_running(&mut tx, now, &mut running).await?;
        insert_events(&mut tx, now, &events).await?;
        audit::append_many(&mut tx, now, &self.actor, &self.meta, &audits).await?;
        tx.commit().await?;
        if changed_any {
            self.handle.poke();
        }
        Ok(())
    }
}

/// (tenant, name, state, stop reason, resume count, started at) of a job an event is about.
type EventJob = (String, String, String, Option<String>, i64, Option<i64>);

fn event_job(e: &ExecEvent) -> &str {
    match e {
        ExecEvent::Running { job_id, .. }
        | ExecEvent::Exited { job_id, .. }
        | ExecEvent::Stopped { job_id, .. }
        | ExecEvent::Lost { job_id, .. } => job_id,
    }
}
