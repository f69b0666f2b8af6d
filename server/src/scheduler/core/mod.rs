//! The scheduling core: a pure function from a [`Snapshot`] to [`Decisions`]. No I/O, no clock
//! (`now` is in the snapshot). GPU amounts are milli-GPUs (1000 = one GPU) everywhere.
//!
//! # Semantics
//! A cycle runs three phases over the pending jobs, each in (priority desc, submitted asc) order:
//!
//! 1. **In-quota**: a job whose group stays within its *reservation* (and its limit) is placed
//!    if it fits on its queue's pools, tried in order (later pools are spillover).
//! 2. **Over-quota**: the remaining jobs that may borrow (queue and group allow over-quota, the
//!    user may exceed, the job is preemptible) share idle capacity by **weighted max-min
//!    fairness through progressive filling**: the next job always comes from the borrowing
//!    group with the smallest `over-quota use / weight` (ties: group index). A group never
//!    exceeds its *limit*.
//! 3. **Reclaim**: an in-quota job that did not fit may take capacity back from over-quota jobs
//!    of other groups. Victims are ordered most over-served group first (highest
//!    `over-quota use / weight`), then lowest priority, then most recently started; jobs younger
//!    than `min_runtime_ms` are protected. Victims are taken until the job fits on one node,
//!    then victims that turned out unneeded are dropped. Each candidate is examined at most
//!    once per cycle, so reclaim is linear in the running jobs; an examined but unneeded
//!    victim is a candidate again in the next cycle. Capacity already being freed for the
//!    group by earlier preemptions counts first, so a starving job waiting for its victims to
//!    stop never triggers a second round.
//!
//! A running job is *in-quota* when it falls within its group's reservation, counting the
//! group's jobs in (non-preemptible first, priority desc, started asc) order; the rest are
//! over-quota. In-quota jobs are never preempted, and a reclaiming job is itself in-quota, so
//! preemption cannot cycle.
//!
//! # Starvation
//! Smaller jobs may start past a larger job that does not fit (backfill). So that a stream of
//! them cannot starve it, per group the first job in order of whole GPUs that has waited
//! `hold_after_ms` and that the group's policy lets run (within its limit, and within its
//! reservation or allowed to borrow) becomes the group's *held job*: the node of its pools
//! closest to fitting it (most fully free devices, not held already) is held for it, so nothing
//! else is placed there (unless the held job is beyond its group's reservation: then the
//! in-quota jobs of other groups, which are owed theirs, still may) and the node fills up for
//! it as its jobs finish; and the group's
//! jobs behind it in order wait until it has started, so the group's own stream cannot keep it
//! over its quota. Holds are recomputed every cycle; reclaim may still take from a held node.
//!
//! A node where victims are still stopping is held for the group they stop for, and a
//! reclaim keeps its victims allocated (they hold their devices until they stop): the room
//! they free, and the room beside them on that node, goes to that group's starving job.
//!
//! # Placement
//! A fraction (< 1000) goes on one device; whole GPUs (multiples of 1000) on fully free devices
//! of one node (gangs spanning nodes are not scheduled: the API refuses them). Fractions prefer
//! the fullest device they fit on (best fit), whole-GPU jobs the node with the fewest free
//! devices that suffices, so fragments stay together.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

mod capacity;
mod reclaim;

use capacity::{Asker, Holder, PoolState};
use reclaim::reclaim;

pub type MilliGpu = u32;
pub const WHOLE: MilliGpu = app::model::WHOLE_GPU_MILLI as MilliGpu;

#[derive(Clone, Debug)]
pub struct Device {
    pub memory_mb: u32,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub devices: Vec<Device>,
}

#[derive(Clone, Debug)]
pub struct Pool {
    pub nodes: Vec<Node>,
}

#[derive(Clone, Debug)]
pub struct GroupPolicy {
    /// Guaranteed milli-GPUs.
    pub reservation: MilliGpu,
    /// Hard cap in milli-GPUs.
    pub limit: MilliGpu,
    pub over_quota_weight: u32,
    pub over_quota_allowed: bool,
}

#[derive(Clone, Debug)]
pub struct Queue {
    pub group: u32,
    /// Pool indices in order; the later ones are spillover.
    pub pools: Vec<u32>,
    pub over_quota: bool,
}

/// Where a job runs: one node, and the milli-GPUs it holds on each of its devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub pool: u32,
    pub node: u32,
    pub slices: Vec<(u32, MilliGpu)>,
}

#[derive(Clone, Debug)]
pub struct RunningJob {
    pub id: u64,
    pub queue: u32,
    pub priority: i32,
    pub preemptible: bool,
    pub gpus: MilliGpu,
    /// GPU memory held per device (fractions), MiB.
    pub memory_mb: u32,
    pub placement: Placement,
    pub started_at: i64,
    /// Already being preempted to give its group's capacity back to this group.
    pub preempted_for: Option<u32>,
    /// The job it is being preempted for, when known.
    pub preempted_for_job: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct PendingJob {
    pub id: u64,
    pub queue: u32,
    pub priority: i32,
    pub preemptible: bool,
    /// The user may exceed the group's reservation.
    pub may_exceed: bool,
    pub gpus: MilliGpu,
    /// GPU memory needed on its device, MiB (fractions); 0 = proportional to the fraction.
    pub memory_mb: u32,
    pub submitted_at: i64,
    /// When it last entered the queue (its submit, or its requeue after a preemption): how
    /// long it has waited counts from here.
    pub waiting_since: i64,
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub now: i64,
    pub min_runtime_ms: i64,
    /// An in-quota job of whole GPUs that has waited this long for room gets a node held for
    /// it (see "Starvation" in the module docs); `None`: never.
    pub hold_after_ms: Option<i64>,
    /// Pending jobs whose victims have all stopped: the capacity they freed is theirs, so
    /// these are placed first (before holds and the in-quota order).
    pub reclaimed_for: Vec<u64>,
    pub pools: Vec<Pool>,
    pub groups: Vec<GroupPolicy>,
    pub queues: Vec<Queue>,
    pub running: Vec<RunningJob>,
    pub pending: Vec<PendingJob>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admit {
    pub job: u64,
    pub placement: Placement,
    pub over_quota: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preempt {
    pub victim: u64,
    pub victim_group: u32,
    pub for_job: u64,
    pub for_group: u32,
}

/// Why a pending job was not admitted this cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// Admitting it would exceed the group's limit.
    OverLimit { used: MilliGpu, limit: MilliGpu },
    /// The group is at its reservation and this job may not borrow.
    QuotaExhausted {
        used: MilliGpu,
        reservation: MilliGpu,
    },
    /// Within quota, but no node of its pools has room; reclaimable capacity is not enough.
    NoCapacity,
    /// Capacity is being reclaimed for it from these over-quota jobs.
    WaitingForPreemption { victims: Vec<u64> },
    /// It waited past the hold threshold: a node is held for it (nothing new starts there)
    /// and has `free` of the `needed` whole GPUs free so far.
    CapacityHeld { free: MilliGpu, needed: MilliGpu },
    /// Its group's job `job` waited past the hold threshold, and the group's jobs behind it
    /// wait until it has started.
    BehindHeldJob { job: u64 },
    /// Borrowing, but idle capacity went to groups with a smaller fair share, or none is idle.
    NoIdleCapacity,
    /// The request can never be placed (larger than any node, bad amount, unknown queue).
    Unschedulable,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    pub admits: Vec<Admit>,
    pub preempts: Vec<Preempt>,
    pub waiting: Vec<(u64, WaitReason)>,
    /// Nodes held this cycle for starving jobs: (job, pool, node, owed: within its group's
    /// reservation, so even other groups' in-quota jobs keep off).
    pub held: Vec<(u64, u32, u32, bool)>,
}

// ---- the cycle ------------------------------------------------------------------------------

struct GroupState {
    used: MilliGpu,
    /// Over-quota use: `used - reservation` when positive.
    share_num: u64,
}

fn over(used: MilliGpu, reservation: MilliGpu) -> MilliGpu {
    used.saturating_sub(reservation)
}

/// Runs one scheduling cycle.
pub fn schedule(s: &Snapshot) -> Decisions {
    let mut pools: Vec<PoolState> = s.pools.iter().map(PoolState::new).collect();
    let mut groups: Vec<GroupState> = s
        .groups
        .iter()
        .map(|_| GroupState {
            used: 0,
            share_num: 0,
        })
        .collect();
    let group_of = |queue: u32| s.queues.get(queue as usize).map(|q| q.group as usize);

    // Current allocations.
    for r in &s.running {
        if let Some(p) = pools.get_mut(r.placement.pool as usize) {
            p.apply(&r.placement, r.memory_mb, 1);
        }
        if let Some(g) = group_of(r.queue) {
            groups[g].used += r.gpus;
        }
    }
    for (g, st) in groups.iter_mut().enumerate() {
        st.share_num = over(st.used, s.groups[g].reservation) as u64;
    }

    let mut order: Vec<usize> = (0..s.pending.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&s.pending[a], &s.pending[b]);
        y.priority
            .cmp(&x.priority)
            .then(x.submitted_at.cmp(&y.submitted_at))
            .then(x.id.cmp(&y.id))
    });

    let mut out = Decisions::default();
    let mut reason: Vec<Option<WaitReason>> = vec![None; s.pending.len()];
    let mut starving: Vec<usize> = Vec::new();
    let mut holds: Vec<(usize, MilliGpu)> = Vec::new();
    let mut borrowers: Vec<Vec<usize>> = vec![Vec::new(); s.groups.len()];

    let place = |pools: &[PoolState], q: &Queue, job: &PendingJob, in_quota: bool| {
        let asker = Asker {
            job: job.id,
            group: q.group,
            in_quota,
        };
        q.pools.iter().find_map(|&p| {
            pools
                .get(p as usize)
                .and_then(|ps| ps.find(p, job.gpus, job.memory_mb, asker))
        })
    };
    // Nodes where victims are still stopping are kept for the group they stop for: what they
    // free, and any room beside them, goes to its starving job, not to whoever comes first.
    let pending_ids: std::collections::HashSet<u64> = s.pending.iter().map(|j| j.id).collect();
    let mut stopping_for: std::collections::HashMap<u64, Vec<u64>> = Default::default();
    for r in &s.running {
        if let (Some(g), Some(ps)) = (r.preempted_for, pools.get_mut(r.placement.pool as usize)) {
            let holder = match r.preempted_for_job {
                Some(j) if pending_ids.contains(&j) => {
                    stopping_for.entry(j).or_default().push(r.id);
                    Holder::Reclaim(j)
                }
                _ => Holder::Group(g),
            };
            ps.hold(r.placement.node as usize, holder);
        }
    }

    // Phase 0: jobs whose victims have stopped take what was freed for them, before anyone.
    let reclaimed: std::collections::HashSet<u64> = s.reclaimed_for.iter().copied().collect();
    let mut done = vec![false; s.pending.len()];
    if !reclaimed.is_empty() {
        for &i in &order {
            let job = &s.pending[i];
            let Some(q) = s.queues.get(job.queue as usize) else {
                continue;
            };
            let g = q.group as usize;
            if !reclaimed.contains(&job.id) || groups[g].used + job.gpus > s.groups[g].reservation {
                continue;
            }
            if let Some(pl) = place(&pools, q, job, true) {
                admit(
                    &mut pools[pl.pool as usize],
                    &mut groups[g],
                    &mut out,
                    job,
                    pl,
                    false,
                );
                done[i] = true;
            }
        }
    }

    // Starvation: per group, the first job in order that has waited past the threshold and
    // could run within the group's policy; a node is held for it, and the group's jobs behind
    // it wait for it.
    let mut head: Vec<Option<u64>> = vec![None; s.groups.len()];
    if let Some(t) = s.hold_after_ms {
        for &i in &order {
            let job = &s.pending[i];
            let Some(q) = s.queues.get(job.queue as usize) else {
                continue;
            };
            let g = q.group as usize;
            if done[i] || head[g].is_some() || job.gpus < WHOLE || s.now - job.waiting_since < t {
                continue;
            }
            let policy = &s.groups[g];
            if !job.gpus.is_multiple_of(WHOLE)
                || job.gpus > policy.limit
                || (job.gpus > policy.reservation && !may_borrow(q, policy, job))
            {
                continue;
            }
            head[g] = Some(job.id);
            let owed = groups[g].used + job.gpus <= policy.reservation;
            if let Some((pool, node, free)) = hold_for(&mut pools, q, job, owed) {
                holds.push((i, free));
                out.held.push((job.id, pool as u32, node as u32, owed));
            }
        }
    }
    let mut passed_head = vec![false; s.groups.len()];

    // Phase 1: in-quota.
    for &i in &order {
        if done[i] {
            continue;
        }
        let job = &s.pending[i];
        let Some(q) = s.queues.get(job.queue as usize) else {
            reason[i] = Some(WaitReason::Unschedulable);
            continue;
        };
        if job.gpus == 0 || (job.gpus > WHOLE && !job.gpus.is_multiple_of(WHOLE)) {
            reason[i] = Some(WaitReason::Unschedulable);
            continue;
        }
        let g = q.group as usize;
        if let Some(h) = head[g] {
            if passed_head[g] {
                reason[i] = Some(WaitReason::BehindHeldJob { job: h });
                continue;
            }
            passed_head[g] = h == job.id;
        }
        let policy = &s.groups[g];
        let used = groups[g].used;
        if used + job.gpus > policy.limit {
            reason[i] = Some(WaitReason::OverLimit {
                used,
                limit: policy.limit,
            });
            continue;
        }
        if used + job.gpus <= policy.reservation {
            match place(&pools, q, job, true) {
                Some(pl) => {
                    admit(
                        &mut pools[pl.pool as usize],
                        &mut groups[g],
                        &mut out,
                        job,
                        pl,
                        false,
                    );
                }
                None if stopping_for.contains_key(&job.id) => {
                    // Its victims are still stopping: it keeps its share of the reservation
                    // (no later job of the group takes it) and waits for them.
                    groups[g].used += job.gpus;
                    reason[i] = Some(WaitReason::WaitingForPreemption {
                        victims: stopping_for[&job.id].clone(),
                    });
                }
                None => starving.push(i),
            }
            continue;
        }
        if may_borrow(q, policy, job) {
            borrowers[g].push(i);
        } else {
            reason[i] = Some(WaitReason::QuotaExhausted {
                used,
                reservation: policy.reservation,
            });
        }
    }

    // Phase 3 first for capacity ordering: reclaim for starving in-quota jobs before lending
    // idle capacity out again (the reclaimed devices are earmarked for them).
    reclaim(s, &mut pools, &mut groups, &starving, &mut out, &mut reason);
    for (i, free) in holds {
        if matches!(
            reason[i],
            None | Some(WaitReason::NoCapacity) | Some(WaitReason::NoIdleCapacity)
        ) {
            reason[i] = Some(WaitReason::CapacityHeld {
                free,
                needed: s.pending[i].gpus,
            });
        }
    }

    // Phase 2: over-quota by progressive filling.
    #[derive(PartialEq, Eq)]
    struct Key {
        num: u64,
        weight: u64,
        group: usize,
    }
    impl Ord for Key {
        fn cmp(&self, o: &Self) -> Ordering {
            // Min-heap on num/weight (cross-multiplied), then group index.
            (o.num as u128 * self.weight as u128)
                .cmp(&(self.num as u128 * o.weight as u128))
                .then(o.group.cmp(&self.group))
        }
    }
    impl PartialOrd for Key {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    let mut heap = BinaryHeap::new();
    let mut cursor = vec![0usize; s.groups.len()];
    for (g, list) in borrowers.iter().enumerate() {
        if !list.is_empty() {
            heap.push(Key {
                num: over(groups[g].used, s.groups[g].reservation) as u64,
                weight: s.groups[g].over_quota_weight as u64,
                group: g,
            });
        }
    }
    let any_room = |pools: &[PoolState]| pools.iter().any(PoolState::has_room);
    while let Some(Key { group: g, .. }) = heap.pop() {
        if !any_room(&pools) {
            break;
        }
        let policy = &s.groups[g];
        while cursor[g] < borrowers[g].len() {
            let i = borrowers[g][cursor[g]];
            cursor[g] += 1;
            let job = &s.pending[i];
            let q = &s.queues[job.queue as usize];
            if groups[g].used + job.gpus > policy.limit {
                reason[i] = Some(WaitReason::OverLimit {
                    used: groups[g].used,
                    limit: policy.limit,
                });
                continue;
            }
            if let Some(pl) = place(&pools, q, job, false) {
                admit(
                    &mut pools[pl.pool as usize],
                    &mut groups[g],
                    &mut out,
                    job,
                    pl,
                    true,
                );
                break;
            }
            reason[i] = Some(WaitReason::NoIdleCapacity);
        }
        if cursor[g] < borrowers[g].len() {
            heap.push(Key {
                num: over(groups[g].used, policy.reservation) as u64,
                weight: policy.over_quota_weight as u64,
                group: g,
            });
        }
    }
    for (g, list) in borrowers.iter().enumerate() {
        for &i in &list[cursor[g].min(list.len())..] {
            reason[i] = Some(WaitReason::NoIdleCapacity);
        }
    }

    let admitted: std::collections::HashSet<u64> = out.admits.iter().map(|a| a.job).collect();
    for &i in &order {
        let id = s.pending[i].id;
        if admitted.contains(&id) {
            continue;
        }
        out.waiting
            .push((id, reason[i].clone().unwrap_or(WaitReason::NoCapacity)));
    }
    out
}

/// Places `job` at `pl`: the pool's capacity and the group's use take it, and it is admitted.
fn admit(
    pool: &mut PoolState,
    group: &mut GroupState,
    out: &mut Decisions,
    job: &PendingJob,
    pl: Placement,
    over_quota: bool,
) {
    pool.apply(&pl, job.memory_mb, 1);
    group.used += job.gpus;
    out.admits.push(Admit {
        job: job.id,
        placement: pl,
        over_quota,
    });
}

/// Whether a job beyond its group's reservation may borrow idle capacity: its queue, group,
/// user and priority class allow it, and the group's over-quota weight is not 0.
fn may_borrow(q: &Queue, policy: &GroupPolicy, job: &PendingJob) -> bool {
    q.over_quota
        && policy.over_quota_allowed
        && job.may_exceed
        && job.preemptible
        && policy.over_quota_weight > 0
}

/// Holds, for a starving job, the node of its queue's pools closest to fitting it; returns
/// the node and the milli-GPUs already free there.
fn hold_for(
    pools: &mut [PoolState],
    q: &Queue,
    job: &PendingJob,
    owed: bool,
) -> Option<(usize, usize, MilliGpu)> {
    let k = (job.gpus / WHOLE) as usize;
    let (pool, node, free) = q
        .pools
        .iter()
        .filter_map(|&p| {
            let ps = pools.get(p as usize)?;
            ps.node_to_hold(k).map(|(n, f)| (p as usize, n, f))
        })
        .fold(None, |best: Option<(usize, usize, usize)>, c| match best {
            Some(b) if b.2 >= c.2 => Some(b),
            _ => Some(c),
        })?;
    pools[pool].hold(
        node,
        Holder::Starving {
            job: job.id,
            group: q.group,
            owed,
        },
    );
    Some((pool, node, free as MilliGpu * WHOLE))
}

/// Which running jobs are over-quota, per the in-quota ordering in the module docs.
pub fn over_quota_jobs(s: &Snapshot) -> Vec<bool> {
    let mut idx: Vec<usize> = (0..s.running.len()).collect();
    idx.sort_by(|&a, &b| {
        let (x, y) = (&s.running[a], &s.running[b]);
        y.preemptible
            .cmp(&x.preemptible)
            .reverse()
            .then(y.priority.cmp(&x.priority))
            .then(x.started_at.cmp(&y.started_at))
            .then(x.id.cmp(&y.id))
    });
    let mut used = vec![0u32; s.groups.len()];
    let mut over_flags = vec![false; s.running.len()];
    for i in idx {
        let r = &s.running[i];
        let Some(q) = s.queues.get(r.queue as usize) else {
            continue;
        };
        let g = q.group as usize;
        used[g] += r.gpus;
        over_flags[i] = used[g] > s.groups[g].reservation;
    }
    over_flags
}
