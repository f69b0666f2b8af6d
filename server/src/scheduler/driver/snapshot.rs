//! Loading the store's view of live jobs, pools, groups and queues into a core snapshot.

use super::*;
use crate::store::{corrupt, opt_text_enum, text_enum};

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
    pub(crate) cpu_milli: i64,
    pub(crate) memory_mb: i64,
    pub(crate) resume_count: i64,
    pub(crate) priority: i64,
    pub(crate) preemptible: bool,
    pub(crate) state: JobState,
    pub(crate) wait_code: Option<String>,
    pub(crate) wait_reason: Option<String>,
    pub(crate) pool_id: Option<String>,
    pub(crate) node: Option<i64>,
    pub(crate) slices: Vec<(u32, u32)>,
    pub(crate) preempted_for: Option<String>,
    pub(crate) stop_reason: Option<StopReason>,
    pub(crate) max_runtime_ms: Option<i64>,
    pub(crate) submitted_at: i64,
    /// When it last entered the queue (submit, or requeue after a preemption).
    pub(crate) queued_at: i64,
    pub(crate) admitted_at: Option<i64>,
    pub(crate) started_at: Option<i64>,
}

#[derive(PartialEq, Eq)]
pub(crate) struct GroupInfo {
    pub(crate) id: String,
    pub(crate) tenant_id: String,
    pub(crate) name: String,
    /// The users who may exceed the group's reservation (empty: everyone may).
    pub(crate) exceed: HashSet<String>,
}

/// The store's view turned into a core snapshot, with the ids to map decisions back.
pub(crate) struct Loaded {
    pub(crate) snap: core::Snapshot,
    pub(crate) pool_ids: Vec<String>,
    pub(crate) pool_names: Vec<String>,
    pub(crate) pool_executor: Vec<ExecutorKind>,
    pub(crate) node_names: Vec<Vec<String>>,
    pub(crate) groups: Vec<GroupInfo>,
    pub(crate) queue_group: Vec<u32>,
    /// Indexed by the core's job id; in [`job_order`].
    pub(crate) jobs: Vec<LiveJob>,
    /// Core indices by store id.
    pub(crate) queue_index: HashMap<String, u32>,
    pub(crate) pool_index: HashMap<String, u32>,
    pub(crate) group_index: HashMap<String, u32>,
}

/// The order of a snapshot's jobs (the core's job ids): submitted first, then by id.
pub(crate) fn job_order(a: &LiveJob, b: &LiveJob) -> std::cmp::Ordering {
    (a.submitted_at, a.id.as_str()).cmp(&(b.submitted_at, b.id.as_str()))
}

/// The position of a job in a snapshot's jobs.
fn position(jobs: &[LiveJob], submitted_at: i64, id: &str) -> Option<u64> {
    jobs.binary_search_by(|x| (x.submitted_at, x.id.as_str()).cmp(&(submitted_at, id)))
        .ok()
        .map(|i| i as u64)
}

impl Loaded {
    /// Whether two loads read the same configuration (pools and their nodes, policies,
    /// queues); their jobs are not compared.
    pub(crate) fn same_config(&self, other: &Loaded) -> bool {
        let (a, b) = (&self.snap, &other.snap);
        a.min_runtime_ms == b.min_runtime_ms
            && a.pools == b.pools
            && a.groups == b.groups
            && a.queues == b.queues
            && self.pool_ids == other.pool_ids
            && self.pool_names == other.pool_names
            && self.pool_executor == other.pool_executor
            && self.node_names == other.node_names
            && self.groups == other.groups
            && self.queue_group == other.queue_group
            && self.queue_index == other.queue_index
    }

    /// The executor of the pool a job is placed in.
    pub(crate) fn executor_of(&self, j: &LiveJob) -> ExecutorKind {
        j.pool_id
            .as_ref()
            .and_then(|p| self.pool_index.get(p))
            .map(|&i| self.pool_executor[i as usize])
            .unwrap_or(ExecutorKind::Simulated)
    }
}

pub(crate) fn live_job(
    r: &AnyRow,
    queue_index: &HashMap<String, u32>,
) -> Result<LiveJob, sqlx::Error> {
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
        cpu_milli: r.try_get("cpu_milli")?,
        memory_mb: r.try_get("memory_mb")?,
        resume_count: r.try_get("resume_count")?,
        priority: r.try_get("priority")?,
        preemptible: r.try_get::<i64, _>("preemptible")? != 0,
        state: text_enum(r, "state")?,
        wait_code: r.try_get("wait_code")?,
        wait_reason: r.try_get("wait_reason")?,
        pool_id: r.try_get("pool_id")?,
        node: r.try_get("node")?,
        slices: match slices {
            Some(s) => serde_json::from_str(&s).map_err(|e| corrupt("slices", e))?,
            None => Vec::new(),
        },
        preempted_for: r.try_get("preempted_for")?,
        stop_reason: opt_text_enum(r, "stop_reason")?,
        max_runtime_ms: r.try_get("max_runtime_ms")?,
        submitted_at: r.try_get("submitted_at")?,
        queued_at: r.try_get("queued_at")?,
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
    let mut l = load_config(store, now, min_runtime_ms).await?;
    let job_rows = sqlx::query(&format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ('queued', 'admitted', 'starting', 'running', 'preempting') ORDER BY submitted_at, id"
    ))
    .fetch_all(&store.pool)
    .await?;
    l.jobs = job_rows
        .iter()
        .map(|r| live_job(r, &l.queue_index))
        .collect::<Result<_, _>>()?;
    // In byte order whatever the store's collation (the snapshot is searched in it).
    l.jobs.sort_by(job_order);
    l.fill(store, now).await?;
    Ok(l)
}

/// Reads pools, policies and queues into a snapshot without jobs.
pub(crate) async fn load_config(
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
                    cpu_milli: n.cpu_cores.saturating_mul(1000),
                    ram_mb: n.memory_mb.min(u32::MAX as u64) as u32,
                })
                .collect(),
        });
        node_names.push(nodes.iter().map(|n| n.name.clone()).collect());
        pool_ids.push(id);
        pool_names.push(r.try_get("name")?);
        pool_executor.push(text_enum(r, "executor")?);
    }
    let policy_rows = sqlx::query(
        "SELECT p.id, p.tenant_id, p.group_id, g.name AS group_name, p.reservation_milli, p.limit_milli, p.over_quota_weight, p.over_quota_allowed, p.exceed_users
         FROM policies p JOIN groups g ON g.id = p.group_id ORDER BY p.id",
    )
    .fetch_all(&store.pool)
    .await?;
    let mut policy_group = HashMap::new();
    let mut tenant_index: HashMap<String, u32> = HashMap::new();
    let mut groups = Vec::new();
    for r in &policy_rows {
        let clamp = |v: i64| v.clamp(0, u32::MAX as i64) as u32;
        policy_group.insert(r.try_get::<String, _>("id")?, groups.len() as u32);
        let next = tenant_index.len() as u32;
        let tenant = *tenant_index
            .entry(r.try_get::<String, _>("tenant_id")?)
            .or_insert(next);
        snap.groups.push(core::GroupPolicy {
            tenant,
            reservation: clamp(r.try_get("reservation_milli")?),
            limit: clamp(r.try_get("limit_milli")?),
            over_quota_weight: clamp(r.try_get("over_quota_weight")?).max(1),
            over_quota_allowed: r.try_get::<i64, _>("over_quota_allowed")? != 0,
            pool_quotas: Vec::new(),
        });
        let exceed_users: Vec<String> =
            serde_json::from_str(&r.try_get::<String, _>("exceed_users")?).unwrap_or_default();
        groups.push(GroupInfo {
            id: r.try_get("group_id")?,
            tenant_id: r.try_get("tenant_id")?,
            name: r.try_get("group_name")?,
            exceed: exceed_users.into_iter().collect(),
        });
    }
    // Per-pool quotas of the groups' policies.
    let quota_rows = sqlx::query(
        "SELECT policy_id, pool_id, reservation_milli, limit_milli FROM policy_pools ORDER BY policy_id, pool_id",
    )
    .fetch_all(&store.pool)
    .await?;
    for r in &quota_rows {
        let clamp = |v: i64| v.clamp(0, u32::MAX as i64) as u32;
        let policy: String = r.try_get("policy_id")?;
        let pool: String = r.try_get("pool_id")?;
        if let (Some(&g), Some(&pool)) = (policy_group.get(&policy), pool_index.get(&pool)) {
            snap.groups[g as usize].pool_quotas.push(core::PoolQuota {
                pool,
                reservation: clamp(r.try_get("reservation_milli")?),
                limit: clamp(r.try_get("limit_milli")?),
            });
        }
    }
    let queue_rows = sqlx::query(
        "SELECT id, policy_id, pools, over_quota, min_runtime_ms FROM queues ORDER BY id",
    )
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
            min_runtime_ms: r.try_get("min_runtime_ms")?,
        });
    }
    let group_index: HashMap<String, u32> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.id.clone(), i as u32))
        .collect();
    Ok(Loaded {
        snap,
        pool_ids,
        pool_names,
        pool_executor,
        node_names,
        groups,
        queue_group,
        jobs: Vec::new(),
        queue_index,
        pool_index,
        group_index,
    })
}

/// The columns [`live_job`] reads.
pub(crate) const JOB_COLUMNS: &str = "id, tenant_id, name, queue_id, user_id, gpu_milli, gpu_memory_mb, cpu_milli, memory_mb, resume_count, priority, preemptible, state, wait_code, wait_reason, pool_id, node, slices, preempted_for, stop_reason, max_runtime_ms, submitted_at, queued_at, admitted_at, started_at";

impl Loaded {
    /// Builds the core's pending and running jobs from `jobs` (and who waits on whom).
    pub(crate) async fn fill(&mut self, store: &Store, now: i64) -> Result<(), sqlx::Error> {
        let Loaded {
            snap,
            groups,
            queue_group,
            jobs,
            pool_index,
            group_index,
            ..
        } = self;
        snap.pending.clear();
        snap.running.clear();
        snap.reclaimed_for.clear();
        for (i, j) in jobs.iter().enumerate() {
            let idx = i as u64;
            let clamp = |v: i64| v.clamp(0, u32::MAX as i64) as u32;
            if let Some(q) = j.queue {
                if j.state == JobState::Queued {
                    if j.stop_reason.is_none() {
                        let g = &groups[queue_group[q as usize] as usize];
                        snap.pending.push(core::PendingJob {
                            id: idx,
                            queue: q,
                            priority: j.priority as i32,
                            preemptible: j.preemptible,
                            may_exceed: g.exceed.is_empty() || g.exceed.contains(&j.user_id),
                            gpus: clamp(j.gpu_milli),
                            memory_mb: clamp(j.gpu_memory_mb),
                            cpu_milli: clamp(j.cpu_milli),
                            ram_mb: clamp(j.memory_mb),
                            submitted_at: j.submitted_at,
                            waiting_since: j.queued_at,
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
                        cpu_milli: clamp(j.cpu_milli),
                        ram_mb: clamp(j.memory_mb),
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
                        // Filled in by `reclaims`.
                        preempted_for_job: None,
                        preemptions: clamp(j.resume_count),
                    });
                }
            }
        }
        reclaims(store, now, jobs, snap).await
    }
}

/// Who waits on whom: for each waiting job with preemptions in its favour since it was last
/// queued, its victims that are still stopping (`preempted_for_job`), or, when all of them
/// have stopped, the job itself (`reclaimed_for`: what they freed is its to take first).
/// How far back a cycle looks for preemptions made for waiting jobs.
const RECLAIM_WINDOW_MS: i64 = 3_600_000;

async fn reclaims(
    store: &Store,
    now: i64,
    jobs: &[LiveJob],
    snap: &mut core::Snapshot,
) -> Result<(), sqlx::Error> {
    // Driven from the preemptions of the last hour (CROSS JOIN keeps SQLite from starting at
    // the waiting jobs instead). Older ones only lose these refinements: their victims still
    // hold their node for the group, as `preempted_for` says.
    let rows = sqlx::query(
        "SELECT p.for_job_id, p.victim_job_id, v.state AS victim_state, f.submitted_at AS for_submitted, v.submitted_at AS victim_submitted
         FROM preemptions p CROSS JOIN jobs f CROSS JOIN jobs v
         WHERE p.at >= $1 AND f.id = p.for_job_id AND v.id = p.victim_job_id
           AND f.state = 'queued' AND p.at >= f.queued_at",
    )
    .bind(now - RECLAIM_WINDOW_MS)
    .fetch_all(&store.pool)
    .await?;
    if rows.is_empty() {
        return Ok(());
    }
    let mut stopping: HashMap<u64, u64> = HashMap::new();
    let mut owed: HashMap<u64, bool> = HashMap::new();
    for r in &rows {
        let for_job: String = r.try_get("for_job_id")?;
        let victim: String = r.try_get("victim_job_id")?;
        let victim_state: JobState = text_enum(r, "victim_state")?;
        let Some(f) = position(jobs, r.try_get("for_submitted")?, &for_job) else {
            continue;
        };
        let still = victim_state == JobState::Preempting;
        let v = position(jobs, r.try_get("victim_submitted")?, &victim);
        if let (true, Some(v)) = (still, v) {
            stopping.insert(v, f);
        }
        *owed.entry(f).or_insert(true) &= !still;
    }
    for r in &mut snap.running {
        if let Some(&f) = stopping.get(&r.id) {
            r.preempted_for_job = Some(f);
        }
    }
    snap.reclaimed_for = owed
        .into_iter()
        .filter(|&(_, all_stopped)| all_stopped)
        .map(|(f, _)| f)
        .collect();
    snap.reclaimed_for.sort_unstable();
    Ok(())
}
