//! The scheduling core: a pure function from a [`Snapshot`] to [`Decisions`]. No I/O, no clock
//! (`now` is in the snapshot). GPU amounts are milli-GPUs (1000 = one GPU) everywhere.
//!
//! # Semantics
//! A cycle runs its phases over the pending jobs in one order: each tenant's jobs by (priority
//! desc, submitted asc), and the tenants' lists merged by the submit time of their next job, so
//! that priorities compare only within a tenant ([`pending_order`]).
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
//! 4. **Fair share**: a borrower that found no idle capacity, of a group whose over-quota use
//!    would stay within its *weighted fair share* with it (the capacity beyond all reservations
//!    split by over-quota weight among the groups that borrow or want to), may take back from
//!    groups above their share, as in phase 3, but only victims whose group stays at or above
//!    its own share once they stop. That is the hysteresis: after a claim the claimant is at or
//!    below its share and the victim's group at or above it, so neither can claim the same
//!    capacity back, and no capacity moves back and forth. Weight 0 means no borrowing.
//!
//! A running job is protected from preemption for its queue's minimum runtime (or the
//! snapshot's default), once more for each time it was preempted before, up to four times as
//! long ([`protected_until`]).
//!
//! A waiting job that fits nowhere is told what it lacks ([`Short`]): the closest miss among
//! nodes with enough GPUs (held for another job, CPU, host memory, GPU memory), or GPUs free but
//! not together, or too few GPUs; and, when borrowers could be reclaimed but are protected,
//! when the first protection ends.
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
mod diagnosis;
mod model;
mod reclaim;
mod rules;

use capacity::{Asker, Holder, PoolState};
use diagnosis::{never_fits, Diagnosis};
pub use model::*;
use reclaim::{reclaim, Claim};
use rules::{fair_shares, may_borrow};
pub use rules::{next_time_change, over_quota_jobs, pending_order, protected_until};

// ---- the cycle ------------------------------------------------------------------------------

struct GroupState {
    used: MilliGpu,
    /// Over-quota use: `used - reservation` when positive.
    share_num: u64,
    /// Use per pool, for the pools the group has a quota on.
    used_on: Vec<(u32, MilliGpu)>,
}

impl GroupState {
    fn new(policy: &GroupPolicy) -> GroupState {
        GroupState {
            used: 0,
            share_num: 0,
            used_on: policy.pool_quotas.iter().map(|q| (q.pool, 0)).collect(),
        }
    }

    /// A job of `gpus` placed on `pool` (or, with `sign` -1, taken off it).
    fn place(&mut self, pool: u32, gpus: MilliGpu, sign: i64) {
        self.used = (self.used as i64 + sign * gpus as i64) as MilliGpu;
        if let Some(e) = self.used_on.iter_mut().find(|e| e.0 == pool) {
            e.1 = (e.1 as i64 + sign * gpus as i64) as MilliGpu;
        }
    }

    fn on(&self, pool: u32) -> MilliGpu {
        self.used_on.iter().find(|e| e.0 == pool).map_or(0, |e| e.1)
    }

    /// Whether the group's quota on `pool` lets a job of `gpus` run there: within its limit
    /// there, and within its reservation there when `in_quota`.
    fn allows(&self, policy: &GroupPolicy, pool: u32, gpus: MilliGpu, in_quota: bool) -> bool {
        match policy.quota_on(pool) {
            None => true,
            Some(q) => {
                let after = self.on(pool) + gpus;
                after <= q.limit && (!in_quota || after <= q.reservation)
            }
        }
    }
}

fn over(used: MilliGpu, reservation: MilliGpu) -> MilliGpu {
    used.saturating_sub(reservation)
}

/// Runs one scheduling cycle.
pub fn schedule(s: &Snapshot) -> Decisions {
    let mut pools: Vec<PoolState> = s.pools.iter().map(PoolState::new).collect();
    let mut groups: Vec<GroupState> = s.groups.iter().map(GroupState::new).collect();
    let group_of = |queue: u32| s.queues.get(queue as usize).map(|q| q.group as usize);

    // Current allocations.
    for r in &s.running {
        if let Some(p) = pools.get_mut(r.placement.pool as usize) {
            p.apply(&r.placement, &r.demand(), 1);
        }
        if let Some(g) = group_of(r.queue) {
            groups[g].place(r.placement.pool, r.gpus, 1);
        }
    }
    for (g, st) in groups.iter_mut().enumerate() {
        st.share_num = over(st.used, s.groups[g].reservation) as u64;
    }

    let order = pending_order(s);

    let mut out = Decisions::default();
    let mut reason: Vec<Option<WaitReason>> = vec![None; s.pending.len()];
    let mut starving: Vec<usize> = Vec::new();
    let mut holds: Vec<(usize, MilliGpu)> = Vec::new();
    let mut borrowers: Vec<Vec<usize>> = vec![Vec::new(); s.groups.len()];

    // Room on the first of the queue's pools that has it and where the group's pool quota
    // lets the job in (within its reservation there when `in_quota`).
    let place =
        |pools: &[PoolState], group: &GroupState, q: &Queue, job: &PendingJob, in_quota: bool| {
            let asker = Asker {
                job: job.id,
                group: q.group,
                in_quota,
            };
            let policy = &s.groups[q.group as usize];
            q.pools.iter().find_map(|&p| {
                if !group.allows(policy, p, job.gpus, in_quota) {
                    return None;
                }
                pools
                    .get(p as usize)
                    .and_then(|ps| ps.find(p, &job.demand(), asker))
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
            if !reclaimed.contains(&job.id) || groups[g].used + job.gpus > s.groups[g].limit {
                continue;
            }
            // Reclaimed for its reservation, or (beyond it) for its group's fair share.
            let over_quota = groups[g].used + job.gpus > s.groups[g].reservation;
            if let Some(pl) = place(&pools, &groups[g], q, job, !over_quota) {
                admit(&mut pools, &mut groups[g], &mut out, job, pl, over_quota);
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
        let in_quota_somewhere = q
            .pools
            .iter()
            .any(|&p| groups[g].allows(policy, p, job.gpus, true));
        if used + job.gpus <= policy.reservation && in_quota_somewhere {
            match place(&pools, &groups[g], q, job, true) {
                Some(pl) => {
                    admit(&mut pools, &mut groups[g], &mut out, job, pl, false);
                }
                None if stopping_for.contains_key(&job.id) => {
                    // Its victims are still stopping: it keeps its share of the reservation
                    // (no later job of the group takes it) and waits for them.
                    groups[g].used += job.gpus;
                    reason[i] = Some(WaitReason::WaitingForPreemption {
                        victims: stopping_for[&job.id].clone(),
                    });
                }
                // Within its reservation only on some pools (its pool quotas): it may still
                // borrow on the others before it reclaims.
                None if !policy.pool_quotas.is_empty() && may_borrow(q, policy, job) => {
                    match place(&pools, &groups[g], q, job, false) {
                        Some(pl) => admit(&mut pools, &mut groups[g], &mut out, job, pl, true),
                        None => starving.push(i),
                    }
                }
                None => starving.push(i),
            }
            continue;
        }
        if let Some(victims) = stopping_for.get(&job.id) {
            // A borrower below its fair share whose victims are still stopping: it starts if
            // room turned up elsewhere, or waits for them (no second round); either way the
            // capacity stays counted for its group.
            match place(&pools, &groups[g], q, job, false) {
                Some(pl) => admit(&mut pools, &mut groups[g], &mut out, job, pl, true),
                None => {
                    groups[g].used += job.gpus;
                    reason[i] = Some(WaitReason::WaitingForPreemption {
                        victims: victims.clone(),
                    });
                }
            }
        } else if may_borrow(q, policy, job) {
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
    reclaim(
        s,
        &mut pools,
        &mut groups,
        &starving,
        Claim::Reservation,
        &mut out,
        &mut reason,
    );
    for (i, free) in holds {
        if matches!(
            reason[i],
            None | Some(WaitReason::NoCapacity { .. }) | Some(WaitReason::NoIdleCapacity)
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
            if let Some(pl) = place(&pools, &groups[g], q, job, false) {
                admit(&mut pools, &mut groups[g], &mut out, job, pl, true);
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

    // Phase 4: borrowers of groups below their weighted fair share take back from groups
    // above theirs.
    let fair = fair_shares(s, &groups, &borrowers);
    let claimants: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| matches!(reason[i], Some(WaitReason::NoIdleCapacity)))
        .filter(|&i| {
            let g = s.queues[s.pending[i].queue as usize].group as usize;
            over(groups[g].used, s.groups[g].reservation) as u64 + s.pending[i].gpus as u64
                <= fair[g]
        })
        .collect();
    reclaim(
        s,
        &mut pools,
        &mut groups,
        &claimants,
        Claim::FairShare(&fair),
        &mut out,
        &mut reason,
    );

    let admitted: std::collections::HashSet<u64> = out.admits.iter().map(|a| a.job).collect();
    let mut why = Diagnosis::default();
    for &i in &order {
        let id = s.pending[i].id;
        if admitted.contains(&id) {
            continue;
        }
        let r = match reason[i].take() {
            None | Some(WaitReason::NoCapacity { .. }) if never_fits(s, &s.pending[i]) => {
                WaitReason::Unschedulable
            }
            None | Some(WaitReason::NoCapacity { .. }) => WaitReason::NoCapacity {
                short: why.short(s, &pools, &s.pending[i]),
            },
            Some(r) => r,
        };
        out.waiting.push((id, r));
    }
    out
}

/// Places `job` at `pl`: the pool's capacity and the group's use take it, and it is admitted.
fn admit(
    pools: &mut [PoolState],
    group: &mut GroupState,
    out: &mut Decisions,
    job: &PendingJob,
    pl: Placement,
    over_quota: bool,
) {
    pools[pl.pool as usize].apply(&pl, &job.demand(), 1);
    group.place(pl.pool, job.gpus, 1);
    out.admits.push(Admit {
        job: job.id,
        placement: pl,
        over_quota,
    });
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
