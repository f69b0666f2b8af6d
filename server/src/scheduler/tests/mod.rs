//! The scheduling semantics, case by case (the properties over random snapshots are in
//! `properties/`). `fairness`: tenants, fair share, protection, node fit and what a waiting
//! job lacks.

mod fairness;

use super::core::*;

fn pool(nodes: usize, devices: usize) -> Pool {
    Pool {
        nodes: (0..nodes)
            .map(|_| Node {
                devices: (0..devices).map(|_| Device { memory_mb: 80_000 }).collect(),
                ..Default::default()
            })
            .collect(),
    }
}

fn group(reservation: MilliGpu, limit: MilliGpu, weight: u32) -> GroupPolicy {
    GroupPolicy {
        reservation,
        limit,
        over_quota_weight: weight,
        over_quota_allowed: true,
        ..Default::default()
    }
}

fn queue(group: u32, pools: &[u32]) -> Queue {
    Queue {
        group,
        pools: pools.to_vec(),
        over_quota: true,
        ..Default::default()
    }
}

fn job(id: u64, queue: u32, gpus: MilliGpu) -> PendingJob {
    PendingJob {
        id,
        queue,
        priority: 0,
        preemptible: true,
        may_exceed: true,
        gpus,
        memory_mb: 0,
        submitted_at: id as i64,
        waiting_since: id as i64,
        ..Default::default()
    }
}

fn running(
    id: u64,
    queue: u32,
    gpus: MilliGpu,
    node: u32,
    devices: &[u32],
    started_at: i64,
) -> RunningJob {
    let per = if gpus < WHOLE { gpus } else { WHOLE };
    RunningJob {
        id,
        queue,
        priority: 0,
        preemptible: true,
        gpus,
        memory_mb: if gpus < WHOLE {
            80_000 * gpus / WHOLE
        } else {
            0
        },
        placement: Placement {
            pool: 0,
            node,
            slices: devices.iter().map(|&d| (d, per)).collect(),
        },
        started_at,
        preempted_for: None,
        preempted_for_job: None,
        ..Default::default()
    }
}

fn reason_of(d: &Decisions, id: u64) -> Option<&WaitReason> {
    d.waiting.iter().find(|(j, _)| *j == id).map(|(_, r)| r)
}

#[test]
fn reservation_first_and_limit_is_a_hard_cap() {
    let s = Snapshot {
        pools: vec![pool(1, 8)],
        groups: vec![group(2000, 3000, 1)],
        queues: vec![queue(0, &[0])],
        pending: (1..=5).map(|i| job(i, 0, 1000)).collect(),
        ..Default::default()
    };
    let d = schedule(&s);
    assert_eq!(
        d.admits.len(),
        3,
        "two reserved, one borrowed, then the limit"
    );
    assert_eq!(d.admits.iter().filter(|a| a.over_quota).count(), 1);
    assert_eq!(
        reason_of(&d, 4),
        Some(&WaitReason::OverLimit {
            used: 3000,
            limit: 3000
        })
    );
}

#[test]
fn fractions_fill_partly_used_devices_first() {
    let s = Snapshot {
        pools: vec![pool(1, 2)],
        groups: vec![group(2000, 2000, 1)],
        queues: vec![queue(0, &[0])],
        running: vec![running(1, 0, 500, 0, &[1], 0)],
        pending: vec![job(2, 0, 250), job(3, 0, 250), job(4, 0, 1000)],
        ..Default::default()
    };
    let d = schedule(&s);
    let on = |id| {
        d.admits
            .iter()
            .find(|a| a.job == id)
            .map(|a| a.placement.slices.clone())
    };
    assert_eq!(on(2), Some(vec![(1, 250)]), "joins the half-used device");
    assert_eq!(on(3), Some(vec![(1, 250)]), "and fills it");
    assert_eq!(on(4), Some(vec![(0, 1000)]), "the whole GPU stays whole");
}

#[test]
fn proportional_fractions_reserve_their_share_of_memory() {
    // Half of an 80 GB card with `memory_mb = 0` holds 40 GB: a 70 GB fraction may not join it
    // (it used to, the half reserving no memory at all); a 30 GB one may.
    let mut half = running(1, 0, 500, 0, &[0], 0);
    half.memory_mb = 0;
    let mut big = job(2, 0, 300);
    big.memory_mb = 70_000;
    let mut small = job(3, 0, 300);
    small.memory_mb = 30_000;
    let s = Snapshot {
        pools: vec![pool(1, 1)],
        groups: vec![group(1000, 1000, 1)],
        queues: vec![queue(0, &[0])],
        running: vec![half],
        pending: vec![big, small],
        ..Default::default()
    };
    let d = schedule(&s);
    assert!(
        d.admits.iter().all(|a| a.job != 2),
        "70 GB beside a proportional half of 80 GB: {:?}",
        d.admits
    );
    assert!(
        d.admits.iter().any(|a| a.job == 3),
        "30 GB fits: {:?}",
        d.waiting
    );
}

#[test]
fn idle_capacity_is_split_by_over_quota_weight() {
    let s = Snapshot {
        pools: vec![pool(1, 6)],
        groups: vec![group(0, 8000, 2), group(0, 8000, 1)],
        queues: vec![queue(0, &[0]), queue(1, &[0])],
        pending: (0..12).map(|i| job(i, (i % 2) as u32, 1000)).collect(),
        ..Default::default()
    };
    let d = schedule(&s);
    let by_group = |q| {
        d.admits
            .iter()
            .filter(|a| s.pending.iter().find(|j| j.id == a.job).map(|j| j.queue) == Some(q))
            .count()
    };
    assert_eq!((by_group(0), by_group(1)), (4, 2));
}

#[test]
fn reclaim_preempts_only_what_is_needed_most_recent_first() {
    // Group 1 borrows all 4 GPUs of one node; group 0 (reservation 2) wants 2 back.
    let s = Snapshot {
        now: 10_000,
        min_runtime_ms: 1_000,
        hold_after_ms: None,
        reclaimed_for: Vec::new(),
        pools: vec![pool(1, 4)],
        groups: vec![group(2000, 4000, 1), group(0, 4000, 1)],
        queues: vec![queue(0, &[0]), queue(1, &[0])],
        running: (0..4)
            .map(|d| running(10 + d as u64, 1, 1000, 0, &[d], d as i64 * 100))
            .collect(),
        pending: vec![job(1, 0, 2000)],
    };
    let d = schedule(&s);
    let victims: Vec<u64> = d.preempts.iter().map(|p| p.victim).collect();
    assert_eq!(victims.len(), 2, "{victims:?}");
    assert!(
        victims.contains(&13) && victims.contains(&12),
        "the two most recently started: {victims:?}"
    );
    assert!(d
        .preempts
        .iter()
        .all(|p| p.for_group == 0 && p.for_job == 1));
    assert!(
        matches!(reason_of(&d, 1), Some(WaitReason::WaitingForPreemption { victims }) if victims.len() == 2)
    );

    // Next cycle, while the victims are stopping: no second round.
    let mut s2 = s.clone();
    for r in &mut s2.running {
        if victims.contains(&r.id) {
            r.preempted_for = Some(0);
        }
    }
    let d2 = schedule(&s2);
    assert!(d2.preempts.is_empty(), "{:?}", d2.preempts);
    assert_eq!(
        reason_of(&d2, 1),
        Some(&WaitReason::WaitingForPreemption { victims: vec![] })
    );

    // With the job they stop for known, it names them, and nobody else may use the node.
    let mut s3 = s2.clone();
    for r in &mut s3.running {
        if victims.contains(&r.id) {
            r.preempted_for_job = Some(1);
        }
    }
    s3.pending.push(job(2, 1, 1000));
    let d3 = schedule(&s3);
    assert!(d3.preempts.is_empty(), "{:?}", d3.preempts);
    match reason_of(&d3, 1) {
        Some(WaitReason::WaitingForPreemption { victims: named }) => {
            let mut named = named.clone();
            named.sort_unstable();
            assert_eq!(named, vec![12, 13]);
        }
        other => panic!("{other:?}"),
    }
    assert!(d3.admits.is_empty(), "{:?}", d3.admits);

    // Once they have stopped, the capacity is the job's first.
    let mut s4 = s3.clone();
    s4.running.retain(|r| !victims.contains(&r.id));
    s4.reclaimed_for = vec![1];
    s4.pending[1].priority = 5;
    let d4 = schedule(&s4);
    assert!(
        d4.admits.iter().any(|a| a.job == 1),
        "the job its victims stopped for starts, before a job of higher priority: {d4:?}"
    );
}

#[test]
fn min_runtime_and_reservations_protect_jobs() {
    let s = Snapshot {
        now: 500,
        min_runtime_ms: 1_000,
        hold_after_ms: None,
        reclaimed_for: Vec::new(),
        pools: vec![pool(1, 2)],
        groups: vec![group(1000, 2000, 1), group(1000, 2000, 1)],
        queues: vec![queue(0, &[0]), queue(1, &[0])],
        // Group 1: one job in its reservation (old), one over it (just started).
        running: vec![
            running(10, 1, 1000, 0, &[0], -5_000),
            running(11, 1, 1000, 0, &[1], 400),
        ],
        pending: vec![job(1, 0, 1000)],
    };
    let d = schedule(&s);
    assert!(
        d.preempts.is_empty(),
        "the over-quota job is too young, the other is reserved"
    );
    assert_eq!(
        reason_of(&d, 1),
        Some(&WaitReason::NoCapacity {
            short: Short::Protected { until: 1_400 }
        }),
        "the wait names when the borrower's protection ends"
    );
    let later = Snapshot { now: 2_000, ..s };
    let d = schedule(&later);
    assert_eq!(
        d.preempts.iter().map(|p| p.victim).collect::<Vec<_>>(),
        [11]
    );
}

#[test]
fn spillover_uses_the_next_pool_with_the_same_accounting() {
    let s = Snapshot {
        pools: vec![pool(1, 1), pool(1, 4)],
        groups: vec![group(3000, 3000, 1)],
        queues: vec![queue(0, &[0, 1])],
        pending: vec![
            job(1, 0, 1000),
            job(2, 0, 1000),
            job(3, 0, 1000),
            job(4, 0, 1000),
        ],
        ..Default::default()
    };
    let d = schedule(&s);
    let pools: Vec<u32> = d.admits.iter().map(|a| a.placement.pool).collect();
    assert_eq!(pools, [0, 1, 1]);
    assert!(matches!(
        reason_of(&d, 4),
        Some(WaitReason::OverLimit { .. })
    ));
}

#[test]
fn non_preemptible_jobs_use_only_reserved_capacity() {
    let mut j = job(1, 0, 1000);
    j.preemptible = false;
    let s = Snapshot {
        pools: vec![pool(1, 4)],
        groups: vec![group(0, 4000, 1)],
        queues: vec![queue(0, &[0])],
        pending: vec![j],
        ..Default::default()
    };
    assert_eq!(
        reason_of(&schedule(&s), 1),
        Some(&WaitReason::QuotaExhausted {
            used: 0,
            reservation: 0
        })
    );
}

#[test]
fn multi_gpu_jobs_need_one_node() {
    let s = Snapshot {
        pools: vec![pool(2, 4)],
        groups: vec![group(16000, 16000, 1)],
        queues: vec![queue(0, &[0])],
        running: vec![
            running(10, 0, 2000, 0, &[0, 1], 0),
            running(11, 0, 2000, 1, &[0, 1], 0),
        ],
        pending: vec![job(1, 0, 3000), job(2, 0, 2000)],
        ..Default::default()
    };
    let d = schedule(&s);
    assert_eq!(
        reason_of(&d, 1),
        Some(&WaitReason::NoCapacity { short: Short::Gpus }),
        "job 2 took two of the four free GPUs; two are too few"
    );
    let alone = Snapshot {
        pending: vec![job(1, 0, 3000)],
        ..s.clone()
    };
    assert_eq!(
        reason_of(&schedule(&alone), 1),
        Some(&WaitReason::NoCapacity {
            short: Short::Fragmented
        }),
        "4 free GPUs, but 2 per node"
    );
    let never = Snapshot {
        pending: vec![job(1, 0, 5000)],
        ..s.clone()
    };
    assert_eq!(
        reason_of(&schedule(&never), 1),
        Some(&WaitReason::Unschedulable),
        "5 GPUs on nodes of 4"
    );
    assert_eq!(d.admits.len(), 1);
    assert_eq!(d.admits[0].placement.slices.len(), 2);
}
