//! A large job behind a stream of small ones, replayed cycle by cycle (the tests are in the
//! parent module).

use std::collections::HashMap;

use crate::scheduler::core::*;

/// A stream of one-GPU jobs arriving every cycle, and one job of a whole node's GPUs that
/// arrived first, all within the group's reservation: returns the cycle the large job started
/// in, if it did within `cycles`.
pub(super) fn large_job_start(
    nodes: usize,
    devices: usize,
    arrivals: &[u8],
    runs: &[u8],
    hold_after_ms: Option<i64>,
    cycles: usize,
) -> Option<usize> {
    let mut s = Snapshot {
        now: 0,
        min_runtime_ms: 10,
        hold_after_ms,
        reclaimed_for: Vec::new(),
        pools: vec![Pool {
            nodes: (0..nodes)
                .map(|_| Node {
                    devices: (0..devices).map(|_| Device { memory_mb: 80_000 }).collect(),
                    ..Default::default()
                })
                .collect(),
        }],
        groups: vec![GroupPolicy {
            reservation: (nodes * devices) as u32 * 1000,
            limit: (nodes * devices) as u32 * 1000,
            over_quota_weight: 1,
            over_quota_allowed: true,
            ..Default::default()
        }],
        queues: vec![Queue {
            group: 0,
            pools: vec![0],
            over_quota: true,
            ..Default::default()
        }],
        running: Vec::new(),
        pending: Vec::new(),
    };
    let large = PendingJob {
        id: 0,
        queue: 0,
        priority: 0,
        preemptible: true,
        may_exceed: true,
        gpus: devices as u32 * 1000,
        memory_mb: 0,
        submitted_at: 0,
        waiting_since: 0,
        ..Default::default()
    };
    // Small jobs are running everywhere when the large one arrives.
    let mut next_id = 1u64;
    let mut ends: HashMap<u64, usize> = HashMap::new();
    for n in 0..nodes {
        for d in 0..devices {
            s.running.push(RunningJob {
                id: next_id,
                queue: 0,
                priority: 0,
                preemptible: true,
                gpus: 1000,
                memory_mb: 0,
                placement: Placement {
                    pool: 0,
                    node: n as u32,
                    slices: vec![(d as u32, 1000)],
                },
                started_at: 0,
                preempted_for: None,
                preempted_for_job: None,
                ..Default::default()
            });
            ends.insert(next_id, 1 + runs[next_id as usize % runs.len()] as usize);
            next_id += 1;
        }
    }
    s.pending.push(large);
    for cycle in 0..cycles {
        for _ in 0..arrivals[cycle % arrivals.len()] {
            s.pending.push(PendingJob {
                id: next_id,
                queue: 0,
                priority: 0,
                preemptible: true,
                may_exceed: true,
                gpus: 1000,
                memory_mb: 0,
                submitted_at: s.now,
                waiting_since: s.now,
                ..Default::default()
            });
            next_id += 1;
        }
        let d = schedule(&s);
        for a in &d.admits {
            if a.job == 0 {
                return Some(cycle);
            }
            let pos = s
                .pending
                .iter()
                .position(|j| j.id == a.job)
                .expect("pending");
            let j = s.pending.remove(pos);
            ends.insert(j.id, cycle + 1 + runs[j.id as usize % runs.len()] as usize);
            s.running.push(RunningJob {
                id: j.id,
                queue: 0,
                priority: 0,
                preemptible: true,
                gpus: j.gpus,
                memory_mb: 0,
                placement: a.placement.clone(),
                started_at: s.now,
                preempted_for: None,
                preempted_for_job: None,
                ..Default::default()
            });
        }
        s.now += 10;
        s.running.retain(|r| ends[&r.id] > cycle);
    }
    None
}
