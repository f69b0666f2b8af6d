//! Properties of the scheduling core over random clusters, replayed for many cycles: jobs
//! arrive late, finish, and preempted victims take several cycles to stop, as on a real
//! cluster. Every oracle here is written from the rules in `core`'s documentation, not by
//! calling the core: capacity and memory per device, group limits, which running jobs are
//! within their reservation, one round of victims per starving job, and work conservation.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::core::*;

/// A generated cluster and its work, with how long each job runs once started (cycles) and
/// how long a victim takes to stop after it is told (cycles).
#[derive(Clone, Debug)]
struct World {
    snap: Snapshot,
    /// Jobs that arrive after the first cycle.
    late: Vec<PendingJob>,
    runs_for: HashMap<u64, u32>,
    stop_delay: u32,
}

fn arb_world() -> impl Strategy<Value = World> {
    let pools = prop::collection::vec(
        prop::collection::vec(prop::collection::vec(16_000u32..80_001, 1..5), 1..4),
        1..3,
    );
    let groups =
        prop::collection::vec((0u32..5, 0u32..5, 0u32..4, prop::bool::weighted(0.8)), 1..5);
    (pools, groups, 0u32..3)
        .prop_flat_map(|(pools, groups, stop_delay)| {
            let npools = pools.len() as u32;
            let ngroups = groups.len() as u32;
            let queues = prop::collection::vec(
                (
                    0..ngroups,
                    prop::collection::vec(0..npools, 1..3),
                    prop::bool::weighted(0.8),
                ),
                1..5,
            );
            let jobs = prop::collection::vec(
                (
                    0u32..8,
                    prop::sample::select(vec![125u32, 250, 375, 500, 1000, 2000, 3000, 4000]),
                    // Explicit GPU memory for fractions (0 = their share of the device's).
                    prop::sample::select(vec![0u32, 0, 8_000, 20_000, 40_000, 70_000]),
                    0i32..3,
                    prop::bool::weighted(0.85),
                    prop::bool::weighted(0.85),
                    1u32..6,
                    prop::bool::weighted(0.3),
                ),
                0..40,
            );
            (Just(pools), Just(groups), queues, jobs, Just(stop_delay))
        })
        .prop_map(|(pools, groups, queues, jobs, stop_delay)| {
            let nq = queues.len() as u32;
            let mut runs_for = HashMap::new();
            let mut pending = Vec::new();
            let mut late = Vec::new();
            for (i, (q, gpus, mem, prio, pre, exceed, runs, is_late)) in
                jobs.into_iter().enumerate()
            {
                runs_for.insert(i as u64, runs);
                let j = PendingJob {
                    id: i as u64,
                    queue: q % nq,
                    priority: prio,
                    preemptible: pre,
                    may_exceed: exceed,
                    gpus,
                    memory_mb: if gpus < WHOLE { mem } else { 0 },
                    submitted_at: i as i64,
                };
                if is_late {
                    late.push(j)
                } else {
                    pending.push(j)
                }
            }
            let snap = Snapshot {
                now: 0,
                min_runtime_ms: 10,
                pools: pools
                    .into_iter()
                    .map(|nodes| Pool {
                        nodes: nodes
                            .into_iter()
                            .map(|devs| Node {
                                devices: devs
                                    .into_iter()
                                    .map(|m| Device { memory_mb: m })
                                    .collect(),
                            })
                            .collect(),
                    })
                    .collect(),
                groups: groups
                    .into_iter()
                    .map(|(r, extra, w, allowed)| GroupPolicy {
                        reservation: r * 1000,
                        limit: (r + extra) * 1000,
                        over_quota_weight: w,
                        over_quota_allowed: allowed,
                    })
                    .collect(),
                queues: queues
                    .into_iter()
                    .map(|(g, mut p, oq)| {
                        p.sort_unstable();
                        p.dedup();
                        Queue {
                            group: g,
                            pools: p,
                            over_quota: oq,
                        }
                    })
                    .collect(),
                running: Vec::new(),
                pending,
            };
            World {
                snap,
                late,
                runs_for,
                stop_delay,
            }
        })
}

// ---- oracles, from the documented rules -------------------------------------------------------

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
fn free_capacity(s: &Snapshot) -> HashMap<(u32, u32, u32), (i64, i64)> {
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

/// No device holds more than one GPU or more memory than it has; no group over its limit.
fn check_capacity(s: &Snapshot) -> Result<(), TestCaseError> {
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
    Ok(())
}

/// The running jobs within their group's reservation: per group, non-preemptible first, then
/// priority (high first), then start (early first), counted until the reservation is full.
fn within_reservation(s: &Snapshot) -> HashSet<u64> {
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
        for r in jobs {
            total += r.gpus;
            if total <= s.groups[g as usize].reservation {
                inside.insert(r.id);
            }
        }
    }
    inside
}

/// Whether `job` could start now on free capacity: one device with room and memory for a
/// fraction, or as many wholly free devices of one node as it asks GPUs.
fn fits_somewhere(
    s: &Snapshot,
    free: &HashMap<(u32, u32, u32), (i64, i64)>,
    job: &PendingJob,
) -> bool {
    let q = &s.queues[job.queue as usize];
    q.pools.iter().any(|&p| {
        s.pools[p as usize]
            .nodes
            .iter()
            .enumerate()
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
fn allowed_now(s: &Snapshot, used: &[u32], job: &PendingJob) -> bool {
    let q = &s.queues[job.queue as usize];
    let g = &s.groups[q.group as usize];
    let after = used[q.group as usize] + job.gpus;
    let may_borrow = q.over_quota
        && g.over_quota_allowed
        && job.may_exceed
        && job.preemptible
        && g.over_quota_weight > 0;
    after <= g.limit && (after <= g.reservation || may_borrow)
}

// ---- the replay -------------------------------------------------------------------------------

struct Stopping {
    job: RunningJob,
    cycles_left: u32,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn cycles_keep_capacity_limits_and_reservations_and_leave_no_work_undone(w in arb_world()) {
        let World { mut snap, mut late, runs_for, stop_delay } = w;
        let mut stopping: Vec<Stopping> = Vec::new();
        let mut started: HashMap<u64, u32> = HashMap::new();
        let mut victims_for: HashMap<u64, usize> = HashMap::new();
        for cycle in 0..300u32 {
            let s = &snap;
            let inside = within_reservation(s);
            let d = schedule(s);
            prop_assert_eq!(d.admits.len() + d.waiting.len(), s.pending.len(), "every pending job is admitted or told why");
            // Victims: over-quota (by the oracle), preemptible, old enough, of another group.
            for p in &d.preempts {
                let r = s.running.iter().find(|r| r.id == p.victim).expect("victim runs");
                prop_assert!(!inside.contains(&r.id), "victim {} is within its group's reservation", r.id);
                prop_assert!(r.preemptible, "victim {} is not preemptible", r.id);
                prop_assert!(s.now - r.started_at >= s.min_runtime_ms, "victim {} is younger than the minimum runtime", r.id);
                prop_assert!(r.preempted_for.is_none(), "victim {} is already stopping", r.id);
                prop_assert_ne!(p.victim_group, p.for_group);
            }
            // One round of victims per starving job.
            let rounds: HashSet<u64> = d.preempts.iter().map(|p| p.for_job).collect();
            for j in rounds {
                let n = victims_for.entry(j).or_default();
                *n += 1;
                prop_assert!(*n == 1, "job {} got a second round of victims in cycle {}", j, cycle);
            }

            // Apply: admitted jobs start; victims begin stopping (they hold their devices
            // until they have stopped); finished jobs leave.
            let mut next = snap.clone();
            for a in &d.admits {
                let pos = next.pending.iter().position(|j| j.id == a.job).expect("admitted job was pending");
                let j = next.pending.remove(pos);
                started.insert(j.id, 0);
                next.running.push(RunningJob {
                    id: j.id,
                    queue: j.queue,
                    priority: j.priority,
                    preemptible: j.preemptible,
                    gpus: j.gpus,
                    memory_mb: j.memory_mb,
                    placement: a.placement.clone(),
                    started_at: next.now,
                    preempted_for: None,
                });
            }
            for p in &d.preempts {
                let r = next.running.iter_mut().find(|r| r.id == p.victim).expect("victim runs");
                r.preempted_for = Some(p.for_group);
                stopping.push(Stopping { job: r.clone(), cycles_left: stop_delay });
            }
            check_capacity(&next)?;

            // Work conservation: after the cycle's admissions, no waiting job fits on free
            // capacity within what its group may use.
            {
                let free = free_capacity(&next);
                let mut used = vec![0u32; next.groups.len()];
                for r in &next.running {
                    used[next.queues[r.queue as usize].group as usize] += r.gpus;
                }
                for j in &next.pending {
                    prop_assert!(
                        !(allowed_now(&next, &used, j) && fits_somewhere(&next, &free, j)),
                        "cycle {}: job {} ({} milli, {} MiB) waits with room for it: {:?}",
                        cycle, j.id, j.gpus, j.memory_mb,
                        d.waiting.iter().find(|(id, _)| *id == j.id)
                    );
                }
            }

            // Time passes: victims whose stop completed leave and requeue; jobs that ran
            // their course finish.
            next.now += next.min_runtime_ms;
            let mut gone: HashSet<u64> = HashSet::new();
            stopping.retain_mut(|st| {
                if st.cycles_left == 0 {
                    gone.insert(st.job.id);
                    false
                } else {
                    st.cycles_left -= 1;
                    true
                }
            });
            for id in &gone {
                let r = next.running.iter().find(|r| r.id == *id).expect("stopping job runs").clone();
                next.pending.push(PendingJob {
                    id: r.id,
                    queue: r.queue,
                    priority: r.priority,
                    preemptible: r.preemptible,
                    may_exceed: true,
                    gpus: r.gpus,
                    memory_mb: r.memory_mb,
                    submitted_at: r.started_at,
                });
                victims_for.retain(|_, _| true);
            }
            next.running.retain(|r| !gone.contains(&r.id));
            for (id, age) in started.iter_mut() {
                *age += 1;
                if *age >= runs_for[id] && !stopping.iter().any(|st| st.job.id == *id) {
                    next.running.retain(|r| r.id != *id || r.preempted_for.is_some());
                }
            }
            started.retain(|id, _| next.running.iter().any(|r| r.id == *id));
            if cycle == 1 {
                next.pending.append(&mut late);
            }
            let idle = d.admits.is_empty() && d.preempts.is_empty() && stopping.is_empty();
            snap = next;
            if idle && late.is_empty() && snap.running.is_empty() {
                break;
            }
        }
    }
}
