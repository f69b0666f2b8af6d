//! The rules a cycle applies: the order of pending jobs, protection from preemption, which
//! running jobs are within their reservation, who may borrow, and weighted fair shares.

use std::collections::BinaryHeap;

use super::*;

/// The order in which pending jobs are considered. Priorities compare only within a tenant
/// (a tenant's priorities cannot put its jobs ahead of another tenant's): each tenant's jobs
/// are in (priority desc, submitted asc) order, and the tenants' lists are merged by the
/// submit time of their next job.
pub fn pending_order(s: &Snapshot) -> Vec<usize> {
    let tenant_of = |j: &PendingJob| {
        s.queues
            .get(j.queue as usize)
            .and_then(|q| s.groups.get(q.group as usize))
            .map_or(u32::MAX, |g| g.tenant)
    };
    // Sort keys built once (a comparison then reads one array, not three).
    let mut keyed: Vec<(u32, i32, i64, u64, usize)> = s
        .pending
        .iter()
        .enumerate()
        .map(|(i, j)| (tenant_of(j), -j.priority, j.submitted_at, j.id, i))
        .collect();
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.iter().map(|k| k.4).collect();
    // One run per tenant; merge the runs by the submit time of each run's next job.
    let mut runs: Vec<&[usize]> = Vec::new();
    let mut start = 0;
    for k in 1..=keyed.len() {
        if k == keyed.len() || keyed[k].0 != keyed[start].0 {
            runs.push(&order[start..k]);
            start = k;
        }
    }
    if runs.len() <= 1 {
        return order;
    }
    let key = |i: usize| (s.pending[i].submitted_at, s.pending[i].id);
    let mut heap: BinaryHeap<std::cmp::Reverse<((i64, u64), usize)>> = runs
        .iter()
        .enumerate()
        .map(|(r, run)| std::cmp::Reverse((key(run[0]), r)))
        .collect();
    let mut merged = Vec::with_capacity(order.len());
    while let Some(std::cmp::Reverse((_, r))) = heap.pop() {
        let Some((first, rest)) = runs[r].split_first() else {
            continue;
        };
        merged.push(*first);
        runs[r] = rest;
        if let Some(&next) = rest.first() {
            heap.push(std::cmp::Reverse((key(next), r)));
        }
    }
    merged
}

/// Until when a running job is protected from preemption: its queue's minimum runtime (or
/// the default), longer for a job preempted before (once more per earlier preemption, up to
/// four times), so that a job is not preempted over and over without making progress.
pub fn protected_until(s: &Snapshot, r: &RunningJob) -> i64 {
    let min = s
        .queues
        .get(r.queue as usize)
        .and_then(|q| q.min_runtime_ms)
        .unwrap_or(s.min_runtime_ms);
    r.started_at
        .saturating_add(min.saturating_mul(1 + r.preemptions.min(3) as i64))
}

/// The first moment after `s.now` at which time alone could change a cycle's decisions or
/// wait reasons: a waiting job of whole GPUs passing the starvation threshold, or a running
/// job's protection from preemption ending. `None`: nothing in the snapshot changes with time.
/// A driver whose snapshot did not change may skip cycles until then.
pub fn next_time_change(s: &Snapshot) -> Option<i64> {
    let holds = s.hold_after_ms.into_iter().flat_map(|t| {
        s.pending
            .iter()
            .filter(|j| j.gpus >= WHOLE)
            .map(move |j| j.waiting_since.saturating_add(t))
    });
    let protections = s
        .running
        .iter()
        .filter(|r| r.preemptible)
        .map(|r| protected_until(s, r));
    holds.chain(protections).filter(|&t| t > s.now).min()
}

/// Each group's weighted fair share of the capacity beyond all reservations, in over-quota
/// milli-GPUs: that capacity split by over-quota weight among the groups that borrow or want
/// to (weight 0: none). See "Fair share" in the module docs.
pub(super) fn fair_shares(
    s: &Snapshot,
    groups: &[GroupState],
    borrowers: &[Vec<usize>],
) -> Vec<u64> {
    let capacity: u64 = s
        .pools
        .iter()
        .flat_map(|p| &p.nodes)
        .map(|n| n.devices.len() as u64 * WHOLE as u64)
        .sum();
    let reserved: u64 = s.groups.iter().map(|g| g.reservation as u64).sum();
    let spare = capacity.saturating_sub(reserved);
    let wants = |g: usize| {
        s.groups[g].over_quota_weight > 0
            && (!borrowers[g].is_empty() || groups[g].used > s.groups[g].reservation)
    };
    let total: u64 = (0..s.groups.len())
        .filter(|&g| wants(g))
        .map(|g| s.groups[g].over_quota_weight as u64)
        .sum();
    (0..s.groups.len())
        .map(|g| {
            if total == 0 || !wants(g) {
                0
            } else {
                spare * s.groups[g].over_quota_weight as u64 / total
            }
        })
        .collect()
}

/// Whether a job beyond its group's reservation may borrow idle capacity: its queue, group,
/// user and priority class allow it, and the group's over-quota weight is not 0.
pub(super) fn may_borrow(q: &Queue, policy: &GroupPolicy, job: &PendingJob) -> bool {
    q.over_quota
        && policy.over_quota_allowed
        && job.may_exceed
        && job.preemptible
        && policy.over_quota_weight > 0
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
    // Per (group, pool) for pools the group has a quota on.
    let mut used_on: std::collections::HashMap<(usize, u32), MilliGpu> = Default::default();
    let mut over_flags = vec![false; s.running.len()];
    for i in idx {
        let r = &s.running[i];
        let Some(q) = s.queues.get(r.queue as usize) else {
            continue;
        };
        let g = q.group as usize;
        used[g] += r.gpus;
        let pool = r.placement.pool;
        let beyond_pool = match s.groups[g].quota_on(pool) {
            Some(pq) => {
                let on = used_on.entry((g, pool)).or_default();
                *on += r.gpus;
                *on > pq.reservation
            }
            None => false,
        };
        over_flags[i] = used[g] > s.groups[g].reservation || beyond_pool;
    }
    over_flags
}
