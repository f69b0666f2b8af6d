//! The generated clusters: pools of nodes and devices, groups, queues, and jobs (some arriving
//! late), with how long each job runs and how long a victim takes to stop.

use std::collections::HashMap;

use proptest::prelude::*;

use crate::scheduler::core::*;

/// A generated cluster and its work, with how long each job runs once started (cycles) and
/// how long a victim takes to stop after it is told (cycles).
#[derive(Clone, Debug)]
pub(super) struct World {
    pub(super) snap: Snapshot,
    /// Jobs that arrive after the first cycle.
    pub(super) late: Vec<PendingJob>,
    pub(super) runs_for: HashMap<u64, u32>,
    pub(super) stop_delay: u32,
}

pub(super) fn arb_world() -> impl Strategy<Value = World> {
    // Nodes: devices (their memory), CPU and host memory (0 = not declared).
    let node = (
        prop::collection::vec(16_000u32..80_001, 1..5),
        prop::sample::select(vec![0u32, 0, 8_000, 32_000]),
        prop::sample::select(vec![0u32, 0, 64_000, 256_000]),
    );
    let pools = prop::collection::vec(prop::collection::vec(node, 1..4), 1..3);
    // Groups: reservation, extra limit, weight, may borrow, and maybe a quota on pool 0
    // (its reservation and extra limit there).
    let groups = prop::collection::vec(
        (
            0u32..5,
            0u32..5,
            0u32..4,
            prop::bool::weighted(0.8),
            prop::option::weighted(0.3, (0u32..3, 0u32..3)),
        ),
        1..5,
    );
    (pools, groups, 0u32..3)
        .prop_flat_map(|(pools, groups, stop_delay)| {
            let npools = pools.len() as u32;
            let ngroups = groups.len() as u32;
            let queues = prop::collection::vec(
                (
                    0..ngroups,
                    prop::collection::vec(0..npools, 1..3),
                    prop::bool::weighted(0.8),
                    prop::sample::select(vec![None, None, Some(0i64), Some(30)]),
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
                    // CPU and host memory of the job's profile.
                    prop::sample::select(vec![0u32, 0, 2_000, 8_000]),
                    prop::sample::select(vec![0u32, 0, 16_000, 100_000]),
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
            for (i, (q, gpus, mem, prio, pre, exceed, runs, is_late, cpu, ram)) in
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
                    cpu_milli: cpu,
                    ram_mb: ram,
                    submitted_at: i as i64,
                    waiting_since: i as i64,
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
                hold_after_ms: Some(30),
                reclaimed_for: Vec::new(),
                pools: pools
                    .into_iter()
                    .map(|nodes| Pool {
                        nodes: nodes
                            .into_iter()
                            .map(|(devs, cpu, ram)| Node {
                                devices: devs
                                    .into_iter()
                                    .map(|m| Device { memory_mb: m })
                                    .collect(),
                                cpu_milli: cpu,
                                ram_mb: ram,
                            })
                            .collect(),
                    })
                    .collect(),
                groups: groups
                    .into_iter()
                    .map(|(r, extra, w, allowed, quota)| GroupPolicy {
                        tenant: 0,
                        reservation: r * 1000,
                        limit: (r + extra) * 1000,
                        over_quota_weight: w,
                        over_quota_allowed: allowed,
                        pool_quotas: quota
                            .map(|(pr, pe)| PoolQuota {
                                pool: 0,
                                reservation: (pr * 1000).min((r + extra) * 1000),
                                limit: ((pr + pe) * 1000).min((r + extra) * 1000),
                            })
                            .into_iter()
                            .collect(),
                    })
                    .collect(),
                queues: queues
                    .into_iter()
                    .map(|(g, mut p, oq, min_runtime_ms)| {
                        p.sort_unstable();
                        p.dedup();
                        Queue {
                            group: g,
                            pools: p,
                            over_quota: oq,
                            min_runtime_ms,
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
