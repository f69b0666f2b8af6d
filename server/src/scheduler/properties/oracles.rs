//! The oracles, written from the rules in `core`'s documentation, not by calling the core.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use crate::scheduler::core::*;

/// GPU memory a job holds on one device: what it asked for, its share of the device's memory
/// when it asked for none, all of it for a whole GPU.
fn held_memory(device_mb: u32, milli: u32, asked_mb: u32) -> u64 {
    if milli >= 1000 {
        device_mb as u64
    } else if asked_mb > 0 {
        asked_mb as u64
    } else {
        device_mb as u64 * milli as u64 / 1000
    }
}

/// Free milli-GPUs and memory per (pool, node, device) given what runs.
pub(super) fn free_capacity(s: &Snapshot) -> HashMap<(u32, u32, u32), (i64, i64)> {
    let mut free = HashMap::new();
    for (p, pool) in s.pools.iter().enumerate() {
        for (n, node) in pool.nodes.iter().enumerate() {
            for (d, dev) in node.devices.iter().enumerate() {
                free.insert(
                    (p as u32, n as u32, d as u32),
                    (1000i64, dev.memory_mb as i64),
                );
            }
        }
    }
    for r in &s.running {
        for &(d, m) in &r.placement.slices {
            let dev = &s.pools[r.placement.pool as usize].nodes[r.placement.node as usize].devices
                [d as usize];
            let e = free
                .get_mut(&(r.placement.pool, r.placement.node, d))
                .expect("placed on a device that exists");
            e.0 -= m as i64;
            e.1 -= held_memory(dev.memory_mb, m, r.memory_mb) as i64;
        }
    }
    free
}

/// Free CPU and host memory per (pool, node) given what runs; a node that declares none (0)
/// has more than any job asks.
pub(super) fn free_host(s: &Snapshot) -> HashMap<(u32, u32), (i64, i64)> {
    let mut free = HashMap::new();
    for (p, pool) in s.pools.iter().enumerate() {
        for (n, node) in pool.nodes.iter().enumerate() {
            let cap = |v: u32| if v == 0 { i64::MAX / 2 } else { v as i64 };
            free.insert(
                (p as u32, n as u32),
                (cap(node.cpu_milli), cap(node.ram_mb)),
            );
        }
    }
    for r in &s.running {
        let e = free
            .get_mut(&(r.placement.pool, r.placement.node))
            .expect("placed on a node that exists");
        e.0 -= r.cpu_milli as i64;
        e.1 -= r.ram_mb as i64;
    }
    free
}

/// No device holds more than one GPU or more memory than it has; no group over its limit.
pub(super) fn check_capacity(s: &Snapshot) -> Result<(), TestCaseError> {
    for (k, (milli, mem)) in free_capacity(s) {
        prop_assert!(
            milli >= 0,
            "device {k:?} oversubscribed by {} milli-GPU",
            -milli
        );
        prop_assert!(
            mem >= 0,
            "device {k:?} memory oversubscribed by {} MiB",
            -mem
        );
    }
    for (k, (cpu, ram)) in free_host(s) {
        prop_assert!(
            cpu >= 0,
            "node {k:?} CPU oversubscribed by {} milli-cores",
            -cpu
        );
        prop_assert!(ram >= 0, "node {k:?} memory oversubscribed by {} MiB", -ram);
    }
    let mut used = vec![0u32; s.groups.len()];
    for r in &s.running {
        used[s.queues[r.queue as usize].group as usize] += r.gpus;
        let held: u32 = r.placement.slices.iter().map(|(_, m)| m).sum();
        prop_assert_eq!(held, r.gpus, "job {} holds what it asked for", r.id);
        let nodes = &s.pools[r.placement.pool as usize].nodes;
        prop_assert!((r.placement.node as usize) < nodes.len());
    }
    for (g, u) in used.iter().enumerate() {
        prop_assert!(
            *u <= s.groups[g].limit,
            "group {g} uses {u} over its limit {}",
            s.groups[g].limit
        );
    }
    for ((g, p), u) in used_on_pools(s) {
        if let Some(q) = s.groups[g as usize]
            .pool_quotas
            .iter()
            .find(|q| q.pool == p)
        {
            prop_assert!(
                u <= q.limit,
                "group {g} uses {u} on pool {p} over its limit there {}",
                q.limit
            );
        }
    }
    Ok(())
}

/// What each group runs on each pool.
pub(super) fn used_on_pools(s: &Snapshot) -> HashMap<(u32, u32), u32> {
    let mut on = HashMap::new();
    for r in &s.running {
        *on.entry((s.queues[r.queue as usize].group, r.placement.pool))
            .or_default() += r.gpus;
    }
    on
}

/// The running jobs within their group's reservation: per group, non-preemptible first, then
/// priority (high first), then start (early first), counted until the reservation is full
/// (and, on a pool the group has a quota on, until its reservation there is full).
pub(super) fn within_reservation(s: &Snapshot) -> HashSet<u64> {
    let mut by_group: HashMap<u32, Vec<&RunningJob>> = HashMap::new();
    for r in &s.running {
        by_group
            .entry(s.queues[r.queue as usize].group)
            .or_default()
            .push(r);
    }
    let mut inside = HashSet::new();
    for (g, mut jobs) in by_group {
        jobs.sort_by_key(|r| (r.preemptible, -r.priority, r.started_at, r.id));
        let mut total = 0;
        let mut on: HashMap<u32, u32> = HashMap::new();
        for r in jobs {
            total += r.gpus;
            let here = on.entry(r.placement.pool).or_default();
            *here += r.gpus;
            let pool_ok = s.groups[g as usize]
                .pool_quotas
                .iter()
                .find(|q| q.pool == r.placement.pool)
                .is_none_or(|q| *here <= q.reservation);
            if total <= s.groups[g as usize].reservation && pool_ok {
                inside.insert(r.id);
            }
        }
    }
    inside
}

/// Whether `job` could start now on free capacity: one device with room and memory for a
/// fraction, or as many wholly free devices of one node as it asks GPUs; held nodes do not count.
pub(super) fn fits_somewhere(
    s: &Snapshot,
    free: &HashMap<(u32, u32, u32), (i64, i64)>,
    host: &HashMap<(u32, u32), (i64, i64)>,
    held: &HashSet<(u32, u32)>,
    used: &[u32],
    job: &PendingJob,
) -> bool {
    let q = &s.queues[job.queue as usize];
    let on = used_on_pools(s);
    let g = &s.groups[q.group as usize];
    let after = used[q.group as usize] + job.gpus;
    q.pools.iter().any(|&p| {
        // The group's quota on the pool: within its limit there, and within its reservation
        // there unless the job may borrow.
        if let Some(pq) = g.pool_quotas.iter().find(|x| x.pool == p) {
            let here = on.get(&(q.group, p)).copied().unwrap_or(0) + job.gpus;
            let in_quota = after <= g.reservation && here <= pq.reservation;
            if here > pq.limit || !(in_quota || may_borrow(s, job)) {
                return false;
            }
        }
        s.pools[p as usize]
            .nodes
            .iter()
            .enumerate()
            .filter(|(n, _)| !held.contains(&(p, *n as u32)))
            .filter(|(n, _)| {
                let (cpu, ram) = host[&(p, *n as u32)];
                cpu >= job.cpu_milli as i64 && ram >= job.ram_mb as i64
            })
            .any(|(n, node)| {
                let devs = node.devices.iter().enumerate().map(|(d, dev)| {
                    let (milli, mem) = free[&(p, n as u32, d as u32)];
                    (milli, mem, dev.memory_mb)
                });
                if job.gpus < 1000 {
                    devs.into_iter().any(|(milli, mem, size)| {
                        milli >= job.gpus as i64
                            && mem >= held_memory(size, job.gpus, job.memory_mb) as i64
                    })
                } else {
                    devs.filter(|&(milli, _, _)| milli == 1000).count() as u32 >= job.gpus / 1000
                }
            })
    })
}

/// Whether the job's group may take it now: within the limit, and within the reservation or
/// allowed to borrow (queue, group, user and job all allow it, and the weight is not 0).
pub(super) fn allowed_now(s: &Snapshot, used: &[u32], job: &PendingJob) -> bool {
    let q = &s.queues[job.queue as usize];
    let g = &s.groups[q.group as usize];
    let after = used[q.group as usize] + job.gpus;
    after <= g.limit && (after <= g.reservation || may_borrow(s, job))
}

/// Queue, group, user and job all allow borrowing, and the group's weight is not 0.
fn may_borrow(s: &Snapshot, job: &PendingJob) -> bool {
    let q = &s.queues[job.queue as usize];
    let g = &s.groups[q.group as usize];
    q.over_quota
        && g.over_quota_allowed
        && job.may_exceed
        && job.preemptible
        && g.over_quota_weight > 0
}

/// Per group, the job capacity is held for: the first pending job in order (priority high
/// first, then submission, then id) of whole GPUs that has waited the threshold and that the
/// group may run at all (within the limit, and within the reservation or allowed to borrow).
pub(super) fn held_jobs(s: &Snapshot, d: &Decisions) -> HashMap<u32, u64> {
    // Reclaimed jobs placed first in the cycle are not waiting any more.
    let first: HashSet<u64> = d
        .admits
        .iter()
        .filter(|a| s.reclaimed_for.contains(&a.job))
        .map(|a| a.job)
        .collect();
    let mut order: Vec<&PendingJob> = s
        .pending
        .iter()
        .filter(|j| !first.contains(&j.id))
        .collect();
    order.sort_by_key(|j| (-j.priority, j.submitted_at, j.id));
    let mut heads = HashMap::new();
    let Some(t) = s.hold_after_ms else {
        return heads;
    };
    for j in order {
        let q = &s.queues[j.queue as usize];
        let g = &s.groups[q.group as usize];
        let borrows = q.over_quota
            && g.over_quota_allowed
            && j.may_exceed
            && j.preemptible
            && g.over_quota_weight > 0;
        if j.gpus >= 1000
            && j.gpus % 1000 == 0
            && s.now - j.waiting_since >= t
            && j.gpus <= g.limit
            && (j.gpus <= g.reservation || borrows)
        {
            heads.entry(q.group).or_insert(j.id);
        }
    }
    heads
}

/// Whether `j` comes after `head` in the cycle's order.
pub(super) fn behind(j: &PendingJob, head: &PendingJob) -> bool {
    (-j.priority, j.submitted_at, j.id) > (-head.priority, head.submitted_at, head.id)
}

/// Whom a node is kept for: a job, a group, and whether in-quota jobs may pass (a starving
/// job's hold when it is not owed the node).
pub(super) type KeptFor = (Option<u64>, Option<u32>, bool);
