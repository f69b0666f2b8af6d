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
//! # Placement
//! A fraction (< 1000) goes on one device; whole GPUs (multiples of 1000) on fully free devices
//! of one node (gangs spanning nodes are not scheduled: the API refuses them). Fractions prefer
//! the fullest device they fit on (best fit), whole-GPU jobs the node with the fewest free
//! devices that suffices, so fragments stay together.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

pub type MilliGpu = u32;
pub const WHOLE: MilliGpu = 1000;

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
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub now: i64,
    pub min_runtime_ms: i64,
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
}

// ---- capacity index -------------------------------------------------------------------------

/// Free capacity of one pool, indexed so that a placement is found in O(devices per node).
struct PoolState {
    /// Free milli-GPUs and memory per device: `free[node][device]`.
    free: Vec<Vec<MilliGpu>>,
    free_mem: Vec<Vec<u32>>,
    mem: Vec<Vec<u32>>,
    /// Nodes by number of fully free devices: `by_whole[k]` holds nodes with exactly k.
    by_whole: Vec<Vec<u32>>,
    whole_pos: Vec<(usize, usize)>,
    /// Partly used devices by free eighths (1..=7): (node, device).
    by_level: Vec<Vec<(u32, u32)>>,
    level_pos: Vec<Vec<Option<usize>>>,
}

fn level(free: MilliGpu) -> usize {
    (free / 125) as usize
}

impl PoolState {
    fn new(pool: &Pool) -> PoolState {
        let max_dev = pool
            .nodes
            .iter()
            .map(|n| n.devices.len())
            .max()
            .unwrap_or(0);
        let mut s = PoolState {
            free: pool
                .nodes
                .iter()
                .map(|n| vec![WHOLE; n.devices.len()])
                .collect(),
            free_mem: pool
                .nodes
                .iter()
                .map(|n| n.devices.iter().map(|d| d.memory_mb).collect())
                .collect(),
            mem: pool
                .nodes
                .iter()
                .map(|n| n.devices.iter().map(|d| d.memory_mb).collect())
                .collect(),
            by_whole: vec![Vec::new(); max_dev + 1],
            whole_pos: Vec::with_capacity(pool.nodes.len()),
            by_level: vec![Vec::new(); 8],
            level_pos: pool
                .nodes
                .iter()
                .map(|n| vec![None; n.devices.len()])
                .collect(),
        };
        for (i, n) in pool.nodes.iter().enumerate() {
            let k = n.devices.len();
            s.whole_pos.push((k, s.by_whole[k].len()));
            s.by_whole[k].push(i as u32);
        }
        s
    }

    fn whole_free(&self, node: usize) -> usize {
        self.whole_pos[node].0
    }

    fn move_node(&mut self, node: usize, to: usize) {
        let (from, pos) = self.whole_pos[node];
        if from == to {
            return;
        }
        let last = self.by_whole[from].len() - 1;
        self.by_whole[from].swap(pos, last);
        self.by_whole[from].pop();
        if pos < self.by_whole[from].len() {
            let moved = self.by_whole[from][pos] as usize;
            self.whole_pos[moved].1 = pos;
        }
        self.whole_pos[node] = (to, self.by_whole[to].len());
        self.by_whole[to].push(node as u32);
    }

    fn unlevel(&mut self, node: usize, dev: usize) {
        if let Some(pos) = self.level_pos[node][dev].take() {
            let lv = level(self.free[node][dev]);
            let list = &mut self.by_level[lv];
            let last = list.len() - 1;
            list.swap(pos, last);
            list.pop();
            if pos < list.len() {
                let (n, d) = list[pos];
                self.level_pos[n as usize][d as usize] = Some(pos);
            }
        }
    }

    fn relevel(&mut self, node: usize, dev: usize) {
        let f = self.free[node][dev];
        if f > 0 && f < WHOLE {
            let lv = level(f);
            self.level_pos[node][dev] = Some(self.by_level[lv].len());
            self.by_level[lv].push((node as u32, dev as u32));
        }
    }

    /// Changes one device's free amount by `delta` (negative = allocate).
    fn adjust(&mut self, node: usize, dev: usize, delta: i64, mem_delta: i64) {
        let was_whole = self.free[node][dev] == WHOLE;
        self.unlevel(node, dev);
        self.free[node][dev] = (self.free[node][dev] as i64 + delta) as MilliGpu;
        self.free_mem[node][dev] = (self.free_mem[node][dev] as i64 + mem_delta).max(0) as u32;
        self.relevel(node, dev);
        let is_whole = self.free[node][dev] == WHOLE;
        if was_whole != is_whole {
            let k = self.whole_free(node);
            self.move_node(node, if is_whole { k + 1 } else { k - 1 });
        }
    }

    fn apply(&mut self, p: &Placement, memory_mb: u32, sign: i64) {
        for &(dev, m) in &p.slices {
            let mem = if m < WHOLE {
                memory_mb as i64
            } else {
                self.mem[p.node as usize][dev as usize] as i64
            };
            self.adjust(p.node as usize, dev as usize, -sign * m as i64, -sign * mem);
        }
    }

    fn memory_for(&self, node: usize, dev: usize, gpus: MilliGpu, memory_mb: u32) -> u32 {
        if memory_mb > 0 {
            memory_mb
        } else {
            ((self.mem[node][dev] as u64 * gpus as u64) / WHOLE as u64) as u32
        }
    }

    /// Room for a job on one given node.
    fn find_on(&self, pool: u32, n: usize, gpus: MilliGpu, memory_mb: u32) -> Option<Placement> {
        if gpus < WHOLE {
            // Fullest device that fits.
            (0..self.free[n].len())
                .filter(|&d| {
                    self.free[n][d] >= gpus
                        && self.free_mem[n][d] >= self.memory_for(n, d, gpus, memory_mb)
                })
                .min_by_key(|&d| self.free[n][d])
                .map(|d| Placement {
                    pool,
                    node: n as u32,
                    slices: vec![(d as u32, gpus)],
                })
        } else {
            let k = (gpus / WHOLE) as usize;
            let devs: Vec<u32> = (0..self.free[n].len())
                .filter(|&d| self.free[n][d] == WHOLE)
                .map(|d| d as u32)
                .take(k)
                .collect();
            (devs.len() == k && gpus.is_multiple_of(WHOLE)).then(|| Placement {
                pool,
                node: n as u32,
                slices: devs.into_iter().map(|d| (d, WHOLE)).collect(),
            })
        }
    }

    /// Finds room for a job without changing anything.
    fn find(&self, pool: u32, gpus: MilliGpu, memory_mb: u32) -> Option<Placement> {
        if gpus == 0 {
            return None;
        }
        if gpus < WHOLE {
            // Best fit among partly used devices, fullest first; then a fully free one.
            for lv in level(gpus)..8 {
                for &(n, d) in &self.by_level[lv] {
                    let (n, d) = (n as usize, d as usize);
                    if self.free[n][d] >= gpus
                        && self.free_mem[n][d] >= self.memory_for(n, d, gpus, memory_mb)
                    {
                        return Some(Placement {
                            pool,
                            node: n as u32,
                            slices: vec![(d as u32, gpus)],
                        });
                    }
                }
            }
            for k in 1..self.by_whole.len() {
                for &n in &self.by_whole[k] {
                    let n = n as usize;
                    if let Some(d) = (0..self.free[n].len()).find(|&d| {
                        self.free[n][d] == WHOLE
                            && self.mem[n][d] >= self.memory_for(n, d, gpus, memory_mb)
                    }) {
                        return Some(Placement {
                            pool,
                            node: n as u32,
                            slices: vec![(d as u32, gpus)],
                        });
                    }
                }
            }
            return None;
        }
        let k = (gpus / WHOLE) as usize;
        if !gpus.is_multiple_of(WHOLE) || k >= self.by_whole.len() {
            return None;
        }
        let n = (k..self.by_whole.len()).find_map(|c| self.by_whole[c].first().copied())? as usize;
        let slices = (0..self.free[n].len())
            .filter(|&d| self.free[n][d] == WHOLE)
            .take(k)
            .map(|d| (d as u32, WHOLE))
            .collect();
        Some(Placement {
            pool,
            node: n as u32,
            slices,
        })
    }
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
    let mut borrowers: Vec<Vec<usize>> = vec![Vec::new(); s.groups.len()];

    let place = |pools: &[PoolState], q: &Queue, job: &PendingJob| {
        q.pools.iter().find_map(|&p| {
            pools
                .get(p as usize)
                .and_then(|ps| ps.find(p, job.gpus, job.memory_mb))
        })
    };

    // Phase 1: in-quota.
    for &i in &order {
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
            match place(&pools, q, job) {
                Some(pl) => {
                    pools[pl.pool as usize].apply(&pl, job.memory_mb, 1);
                    groups[g].used += job.gpus;
                    out.admits.push(Admit {
                        job: job.id,
                        placement: pl,
                        over_quota: false,
                    });
                }
                None => starving.push(i),
            }
            continue;
        }
        let may_borrow = q.over_quota
            && policy.over_quota_allowed
            && job.may_exceed
            && job.preemptible
            && policy.over_quota_weight > 0;
        if may_borrow {
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
    let any_room = |pools: &[PoolState]| {
        pools.iter().any(|p| {
            p.by_whole.iter().skip(1).any(|b| !b.is_empty())
                || p.by_level.iter().any(|b| !b.is_empty())
        })
    };
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
            if let Some(pl) = place(&pools, q, job) {
                pools[pl.pool as usize].apply(&pl, job.memory_mb, 1);
                groups[g].used += job.gpus;
                out.admits.push(Admit {
                    job: job.id,
                    placement: pl,
                    over_quota: true,
                });
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

fn reclaim(
    s: &Snapshot,
    pools: &mut [PoolState],
    groups: &mut [GroupState],
    starving: &[usize],
    out: &mut Decisions,
    reason: &mut [Option<WaitReason>],
) {
    if starving.is_empty() {
        return;
    }
    let group_of = |q: u32| s.queues[q as usize].group as usize;
    let over_flags = over_quota_jobs(s);
    // Capacity already being freed for a group counts first (it stays allocated until the
    // victims stop, so nothing else can be placed on it meanwhile).
    let mut inflight = vec![0u64; s.groups.len()];
    for r in &s.running {
        if let Some(g) = r.preempted_for {
            if let Some(slot) = inflight.get_mut(g as usize) {
                *slot += r.gpus as u64;
            }
        }
    }
    // Candidates per group, each list in victim order: lowest priority, most recently started.
    let mut lists: Vec<Vec<usize>> = vec![Vec::new(); s.groups.len()];
    let mut reclaimable = vec![0u64; pools.len()];
    for (i, r) in s.running.iter().enumerate() {
        if over_flags[i]
            && r.preemptible
            && r.preempted_for.is_none()
            && s.now - r.started_at >= s.min_runtime_ms
        {
            lists[group_of(r.queue)].push(i);
            reclaimable[r.placement.pool as usize] += r.gpus as u64;
        }
    }
    for list in &mut lists {
        list.sort_by(|&a, &b| {
            let (x, y) = (&s.running[a], &s.running[b]);
            x.priority
                .cmp(&y.priority)
                .then(y.started_at.cmp(&x.started_at))
                .then(y.id.cmp(&x.id))
        });
    }
    let mut cursor = vec![0usize; s.groups.len()];
    let mut taken = vec![false; s.running.len()];
    // Max-heap of groups by over-quota use / weight, refreshed lazily when popped.
    let share = |g: usize, groups: &[GroupState]| {
        let num = over(groups[g].used, s.groups[g].reservation) as u64;
        let w = s.groups[g].over_quota_weight.max(1) as u64;
        (num, w)
    };
    #[derive(PartialEq, Eq)]
    struct Entry {
        num: u64,
        w: u64,
        group: usize,
    }
    impl Ord for Entry {
        fn cmp(&self, o: &Self) -> Ordering {
            (self.num as u128 * o.w as u128)
                .cmp(&(o.num as u128 * self.w as u128))
                .then(o.group.cmp(&self.group))
        }
    }
    impl PartialOrd for Entry {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    let mut heap: BinaryHeap<Entry> = (0..s.groups.len())
        .filter(|&g| !lists[g].is_empty())
        .map(|g| {
            let (num, w) = share(g, groups);
            Entry { num, w, group: g }
        })
        .collect();
    // Requests that failed, per pool list: larger ones fail too (reclaimable capacity only
    // shrinks during the cycle).
    let mut failed: Vec<(Vec<u32>, MilliGpu)> = Vec::new();

    for &i in starving {
        let job = &s.pending[i];
        let q = &s.queues[job.queue as usize];
        let g = q.group as usize;
        if inflight[g] >= job.gpus as u64 {
            inflight[g] -= job.gpus as u64;
            reason[i] = Some(WaitReason::WaitingForPreemption {
                victims: Vec::new(),
            });
            continue;
        }
        let available: u64 = q.pools.iter().map(|&p| reclaimable[p as usize]).sum();
        let fails_early = available < job.gpus as u64
            || failed.iter().any(|(p, k)| p == &q.pools && job.gpus >= *k);
        if fails_early {
            reason[i] = Some(WaitReason::NoCapacity);
            continue;
        }
        let saved_cursor = cursor.clone();
        let mut chosen: Vec<usize> = Vec::new();
        let mut skipped: Vec<Entry> = Vec::new();
        let mut fit: Option<Placement> = None;
        while let Some(e) = heap.pop() {
            let vg = e.group;
            let (num, w) = share(vg, groups);
            if (num, w) != (e.num, e.w) {
                heap.push(Entry { num, w, group: vg });
                continue;
            }
            if vg == g {
                skipped.push(e);
                continue;
            }
            // Next victim of this group in one of the job's pools.
            let mut victim = None;
            while cursor[vg] < lists[vg].len() {
                let v = lists[vg][cursor[vg]];
                cursor[vg] += 1;
                if !taken[v] && q.pools.contains(&s.running[v].placement.pool) {
                    victim = Some(v);
                    break;
                }
            }
            let Some(v) = victim else {
                if cursor[vg] < lists[vg].len() {
                    skipped.push(e);
                }
                continue;
            };
            let r = &s.running[v];
            pools[r.placement.pool as usize].apply(&r.placement, r.memory_mb, -1);
            groups[vg].used -= r.gpus;
            chosen.push(v);
            if cursor[vg] < lists[vg].len() {
                let (num, w) = share(vg, groups);
                heap.push(Entry { num, w, group: vg });
            }
            // The job can only newly fit where this victim ran.
            let ps = &pools[r.placement.pool as usize];
            fit = ps.find_on(
                r.placement.pool,
                r.placement.node as usize,
                job.gpus,
                job.memory_mb,
            );
            if fit.is_some() {
                break;
            }
        }
        heap.extend(skipped);
        let Some(mut pl) = fit else {
            for &v in &chosen {
                let r = &s.running[v];
                pools[r.placement.pool as usize].apply(&r.placement, r.memory_mb, 1);
                groups[group_of(r.queue)].used += r.gpus;
            }
            cursor = saved_cursor;
            for g2 in chosen.iter().map(|&v| group_of(s.running[v].queue)) {
                let (num, w) = share(g2, groups);
                heap.push(Entry { num, w, group: g2 });
            }
            failed.push((q.pools.clone(), job.gpus));
            reason[i] = Some(WaitReason::NoCapacity);
            continue;
        };
        // Drop victims that turned out unneeded (latest first): those on other nodes, then any
        // whose return still leaves room on the chosen node.
        let mut kept = Vec::new();
        for &v in chosen.iter().rev() {
            let r = &s.running[v];
            let vg = group_of(r.queue);
            let ps = &mut pools[r.placement.pool as usize];
            ps.apply(&r.placement, r.memory_mb, 1);
            let same_node = r.placement.pool == pl.pool && r.placement.node == pl.node;
            if same_node {
                if let Some(p) = ps.find_on(pl.pool, pl.node as usize, job.gpus, job.memory_mb) {
                    pl = p;
                } else {
                    ps.apply(&r.placement, r.memory_mb, -1);
                    kept.push(v);
                    continue;
                }
            }
            groups[vg].used += r.gpus;
            // Examined once per cycle: an unneeded victim is a candidate again next cycle.
            reclaimable[r.placement.pool as usize] -= r.gpus as u64;
            let (num, w) = share(vg, groups);
            heap.push(Entry { num, w, group: vg });
        }
        pools[pl.pool as usize].apply(&pl, job.memory_mb, 1);
        groups[g].used += job.gpus;
        let mut ids = Vec::with_capacity(kept.len());
        for v in kept {
            let r = &s.running[v];
            let vg = group_of(r.queue);
            taken[v] = true;
            reclaimable[r.placement.pool as usize] -= r.gpus as u64;
            out.preempts.push(Preempt {
                victim: r.id,
                victim_group: vg as u32,
                for_job: job.id,
                for_group: g as u32,
            });
            ids.push(r.id);
        }
        reason[i] = Some(WaitReason::WaitingForPreemption { victims: ids });
    }
}
