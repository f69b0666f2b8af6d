//! Tenants, weighted fair share, protection from repeated preemption, node fit beyond GPUs,
//! and what a waiting job is told it lacks.

use super::*;

fn snapshot(pools: Vec<Pool>, groups: Vec<GroupPolicy>, queues: Vec<Queue>) -> Snapshot {
    Snapshot {
        now: 100_000,
        min_runtime_ms: 1_000,
        pools,
        groups,
        queues,
        ..Default::default()
    }
}

/// Replays cycles as a cluster would: admitted jobs start, victims stop after one cycle and
/// requeue, nothing finishes. Returns the preemptions per cycle.
fn replay(mut s: Snapshot, cycles: usize) -> (Snapshot, Vec<usize>) {
    let mut per_cycle = Vec::new();
    for _ in 0..cycles {
        let d = schedule(&s);
        per_cycle.push(d.preempts.len());
        // Victims told in an earlier cycle have stopped now: they requeue.
        let stopped: Vec<RunningJob> = s
            .running
            .iter()
            .filter(|r| r.preempted_for.is_some())
            .cloned()
            .collect();
        s.running.retain(|r| r.preempted_for.is_none());
        s.reclaimed_for = stopped.iter().filter_map(|r| r.preempted_for_job).collect();
        for r in stopped {
            s.pending.push(PendingJob {
                id: r.id,
                queue: r.queue,
                preemptible: true,
                may_exceed: true,
                gpus: r.gpus,
                submitted_at: r.id as i64,
                waiting_since: s.now,
                ..Default::default()
            });
        }
        for a in &d.admits {
            let pos = s
                .pending
                .iter()
                .position(|j| j.id == a.job)
                .expect("pending");
            let j = s.pending.remove(pos);
            s.running.push(RunningJob {
                id: j.id,
                queue: j.queue,
                preemptible: true,
                gpus: j.gpus,
                placement: a.placement.clone(),
                started_at: s.now,
                ..Default::default()
            });
        }
        for p in &d.preempts {
            let r = s
                .running
                .iter_mut()
                .find(|r| r.id == p.victim)
                .expect("runs");
            r.preempted_for = Some(p.for_group);
            r.preempted_for_job = Some(p.for_job);
        }
        s.now += 10_000;
    }
    (s, per_cycle)
}

fn used_by(s: &Snapshot, group: u32) -> MilliGpu {
    s.running
        .iter()
        .filter(|r| s.queues[r.queue as usize].group == group && r.preempted_for.is_none())
        .map(|r| r.gpus)
        .sum()
}

#[test]
fn a_group_below_its_fair_share_takes_back_from_one_above_and_it_settles() {
    // 8 GPUs, no reservations, equal weights. Group 0 borrowed all 8 before group 1 came.
    let mut s = snapshot(
        vec![pool(1, 8)],
        vec![group(0, 8000, 1), group(0, 8000, 1)],
        vec![queue(0, &[0]), queue(1, &[0])],
    );
    for d in 0..8u32 {
        s.running.push(running(100 + d as u64, 0, 1000, 0, &[d], 0));
    }
    for i in 0..8 {
        s.pending.push(job(200 + i, 0, 1000));
        s.pending.push(job(300 + i, 1, 1000));
    }
    // One reclaim per node and cycle (the node is held for the job its victims stop for).
    let (end, preempts) = replay(s, 30);
    assert_eq!(
        (used_by(&end, 0), used_by(&end, 1)),
        (4000, 4000),
        "equal weights end with equal shares: {preempts:?}"
    );
    assert_eq!(
        preempts.iter().sum::<usize>(),
        4,
        "exactly 4 GPUs moved, none back (hysteresis): {preempts:?}"
    );
}

#[test]
fn fair_share_follows_the_weights_and_weight_zero_never_borrows() {
    let mut s = snapshot(
        vec![pool(1, 8)],
        vec![group(0, 8000, 3), group(0, 8000, 1), group(0, 8000, 0)],
        vec![queue(0, &[0]), queue(1, &[0]), queue(2, &[0])],
    );
    for d in 0..8u32 {
        s.running.push(running(100 + d as u64, 1, 1000, 0, &[d], 0));
    }
    for i in 0..8 {
        s.pending.push(job(200 + i, 0, 1000));
        s.pending.push(job(300 + i, 1, 1000));
        s.pending.push(job(400 + i, 2, 1000));
    }
    let (end, preempts) = replay(s, 30);
    assert_eq!(
        (used_by(&end, 0), used_by(&end, 1), used_by(&end, 2)),
        (6000, 2000, 0),
        "weights 3:1 split 8 GPUs 6:2; weight 0 borrows nothing: {preempts:?}"
    );
    assert_eq!(preempts.iter().sum::<usize>(), 6, "{preempts:?}");
}

#[test]
fn a_group_at_its_fair_share_does_not_preempt() {
    // Group 1 already has its share (4 of 8): it waits for idle capacity instead.
    let mut s = snapshot(
        vec![pool(1, 8)],
        vec![group(0, 8000, 1), group(0, 8000, 1)],
        vec![queue(0, &[0]), queue(1, &[0])],
    );
    for d in 0..4u32 {
        s.running.push(running(100 + d as u64, 0, 1000, 0, &[d], 0));
        s.running
            .push(running(110 + d as u64, 1, 1000, 0, &[d + 4], 0));
    }
    s.pending.push(job(200, 0, 1000));
    s.pending.push(job(300, 1, 1000));
    let d = schedule(&s);
    assert!(d.preempts.is_empty(), "{d:?}");
    assert_eq!(reason_of(&d, 300), Some(&WaitReason::NoIdleCapacity));
}

#[test]
fn priorities_compare_only_within_a_tenant() {
    // Two tenants share one GPU. Tenant 1 submits later with priority 1000; tenant 0's job,
    // submitted first with priority 0, still goes first.
    let mut groups = vec![group(1000, 1000, 1), group(1000, 1000, 1)];
    groups[1].tenant = 1;
    let mut s = snapshot(
        vec![pool(1, 1)],
        groups,
        vec![queue(0, &[0]), queue(1, &[0])],
    );
    let mut loud = job(2, 1, 1000);
    loud.priority = 1000;
    s.pending = vec![loud, job(1, 0, 1000)];
    let d = schedule(&s);
    assert_eq!(d.admits.len(), 1);
    assert_eq!(
        d.admits[0].job, 1,
        "the earlier job of the other tenant: {d:?}"
    );

    // Within one tenant, priority still wins over submit time.
    let mut same = s.clone();
    same.groups[1].tenant = 0;
    let d = schedule(&same);
    assert_eq!(d.admits[0].job, 2, "{d:?}");
}

#[test]
fn pending_order_merges_tenants_by_the_submit_time_of_their_next_job() {
    let mut groups = vec![group(0, 1000, 1), group(0, 1000, 1)];
    groups[1].tenant = 1;
    let mut s = snapshot(
        vec![pool(1, 1)],
        groups,
        vec![queue(0, &[0]), queue(1, &[0])],
    );
    // Tenant 0: jobs 1 (t=1), 3 (t=3, priority 5). Tenant 1: jobs 2 (t=2), 4 (t=4).
    let mut high = job(3, 0, 1000);
    high.priority = 5;
    s.pending = vec![job(1, 0, 1000), job(2, 1, 1000), high, job(4, 1, 1000)];
    let ids: Vec<u64> = pending_order(&s).iter().map(|&i| s.pending[i].id).collect();
    // Tenant 0's list is [3, 1] (priority first); its next job is 3 (t=3), so tenant 1's
    // job 2 (t=2) comes first, then 3, then 1 (t=1) before 4 (t=4).
    assert_eq!(ids, vec![2, 3, 1, 4]);
}

#[test]
fn a_job_preempted_before_is_protected_longer() {
    // Group 1 borrows both GPUs; group 0 is owed one. Both borrowers started about 1.5 s ago;
    // the minimum runtime is 1 s. The one preempted twice before is protected for 3 s.
    let mut s = snapshot(
        vec![pool(1, 2)],
        vec![group(1000, 2000, 1), group(0, 2000, 1)],
        vec![queue(0, &[0]), queue(1, &[0])],
    );
    let now = s.now;
    // Victims go most recently started first: job 10 would be first, but it is protected.
    let mut again = running(10, 1, 1000, 0, &[0], now - 1_400);
    again.preemptions = 2;
    s.running = vec![again, running(11, 1, 1000, 0, &[1], now - 1_500)];
    s.pending = vec![job(1, 0, 1000)];
    let d = schedule(&s);
    assert_eq!(d.preempts.len(), 1);
    assert_eq!(
        d.preempts[0].victim, 11,
        "not the job preempted twice before: {d:?}"
    );

    // With only the twice-preempted one there, nothing is preempted, and the wait says until
    // when it is protected.
    s.running.truncate(1);
    s.pools = vec![pool(1, 1)];
    s.running[0].placement.slices = vec![(0, 1000)];
    let d = schedule(&s);
    assert!(d.preempts.is_empty(), "{d:?}");
    assert_eq!(
        reason_of(&d, 1),
        Some(&WaitReason::NoCapacity {
            short: Short::Protected {
                until: now - 1_400 + 3_000
            }
        })
    );
}

#[test]
fn a_queue_minimum_runtime_overrides_the_default() {
    let mut s = snapshot(
        vec![pool(1, 1)],
        vec![group(1000, 1000, 1), group(0, 1000, 1)],
        vec![queue(0, &[0]), queue(1, &[0])],
    );
    s.queues[1].min_runtime_ms = Some(60_000);
    s.running = vec![running(10, 1, 1000, 0, &[0], s.now - 5_000)];
    s.pending = vec![job(1, 0, 1000)];
    assert!(
        schedule(&s).preempts.is_empty(),
        "protected by its queue's 60 s"
    );
    s.queues[1].min_runtime_ms = Some(0);
    assert_eq!(schedule(&s).preempts.len(), 1, "no protection in its queue");
}

fn node(devices: usize, cpu_milli: u32, ram_mb: u32) -> Node {
    Node {
        devices: (0..devices).map(|_| Device { memory_mb: 80_000 }).collect(),
        cpu_milli,
        ram_mb,
    }
}

#[test]
fn jobs_fit_on_nodes_by_cpu_and_host_memory_too() {
    // Two nodes of 4 GPUs: 16 cores and 64 GiB, and 64 cores and 512 GiB.
    let s = Snapshot {
        pools: vec![Pool {
            nodes: vec![node(4, 16_000, 65_536), node(4, 64_000, 524_288)],
        }],
        pending: vec![
            PendingJob {
                cpu_milli: 12_000,
                ram_mb: 32_768,
                ..job(1, 0, 1000)
            },
            PendingJob {
                cpu_milli: 12_000,
                ram_mb: 32_768,
                ..job(2, 0, 1000)
            },
            PendingJob {
                cpu_milli: 48_000,
                ram_mb: 400_000,
                ..job(3, 0, 1000)
            },
        ],
        ..snapshot(vec![], vec![group(8000, 8000, 1)], vec![queue(0, &[0])])
    };
    let d = schedule(&s);
    let node_of = |id| {
        d.admits
            .iter()
            .find(|a| a.job == id)
            .map(|a| a.placement.node)
    };
    assert_eq!(d.admits.len(), 3, "{d:?}");
    // Each node's CPU holds: 12 + 12 cores do not fit in 16, and 48 fits only on node 1.
    let on_1: u32 = [1, 2, 3].iter().filter(|&&j| node_of(j) == Some(1)).count() as u32;
    assert_eq!(node_of(3), Some(1));
    assert!(
        on_1 >= 2,
        "at most one 12-core job on the 16-core node: {d:?}"
    );

    // A fourth 48-core job finds GPUs free on both nodes but no CPU: it waits, told so.
    let mut more = s.clone();
    more.pending.push(PendingJob {
        cpu_milli: 48_000,
        ..job(4, 0, 1000)
    });
    let d = schedule(&more);
    assert_eq!(
        reason_of(&d, 4),
        Some(&WaitReason::NoCapacity { short: Short::Cpu }),
        "{d:?}"
    );
}

#[test]
fn a_waiting_fraction_is_told_it_lacks_gpu_memory() {
    // One 80 GB device with a 500-milli job holding 40 GB: a 250-milli job asking 60 GB has
    // the milli-GPUs but not the memory.
    let mut s = snapshot(
        vec![pool(1, 1)],
        vec![group(1000, 1000, 1)],
        vec![queue(0, &[0])],
    );
    s.running = vec![running(10, 0, 500, 0, &[0], 0)];
    s.running[0].preemptible = false;
    s.pending = vec![PendingJob {
        memory_mb: 60_000,
        ..job(1, 0, 250)
    }];
    let d = schedule(&s);
    assert_eq!(
        reason_of(&d, 1),
        Some(&WaitReason::NoCapacity {
            short: Short::GpuMemory
        }),
        "{d:?}"
    );
}

fn quota(pool: u32, reservation: MilliGpu, limit: MilliGpu) -> PoolQuota {
    PoolQuota {
        pool,
        reservation,
        limit,
    }
}

#[test]
fn a_pool_quota_caps_the_group_there_and_the_rest_spills_over() {
    // Overall the group may use 8 GPUs, but at most 2 on pool 0; its queue spills to pool 1.
    let mut g = group(8000, 8000, 1);
    g.pool_quotas = vec![quota(0, 2000, 2000)];
    let mut s = snapshot(
        vec![pool(1, 4), pool(1, 4)],
        vec![g],
        vec![queue(0, &[0, 1])],
    );
    s.pending = (1..=4).map(|i| job(i, 0, 1000)).collect();
    let d = schedule(&s);
    let on = |p: u32| d.admits.iter().filter(|a| a.placement.pool == p).count();
    assert_eq!((on(0), on(1)), (2, 2), "{d:?}");
}

#[test]
fn beyond_its_pool_reservation_a_job_is_over_quota_there_and_may_be_reclaimed() {
    // Group 0 reserves 4 GPUs overall but only 1 on pool 0, where it runs 2: the later one is
    // over-quota there. Group 1, owed 1 GPU on pool 0, reclaims exactly that one.
    let mut g0 = group(4000, 4000, 1);
    g0.pool_quotas = vec![quota(0, 1000, 2000)];
    let mut s = snapshot(
        vec![pool(1, 2)],
        vec![g0, group(1000, 1000, 1)],
        vec![queue(0, &[0]), queue(1, &[0])],
    );
    s.running = vec![
        running(10, 0, 1000, 0, &[0], 0),
        running(11, 0, 1000, 0, &[1], 10),
    ];
    assert_eq!(over_quota_jobs(&s), vec![false, true]);
    s.pending = vec![job(1, 1, 1000)];
    let d = schedule(&s);
    assert_eq!(d.preempts.len(), 1, "{d:?}");
    assert_eq!(d.preempts[0].victim, 11);
}

#[test]
fn a_job_beyond_its_pool_reservation_borrows_instead_of_reclaiming() {
    // Group 0 is within its overall reservation, but its reservation on the only pool is used
    // up: it borrows (here: nothing idle) and preempts no one.
    let mut g0 = group(4000, 4000, 1);
    g0.pool_quotas = vec![quota(0, 1000, 4000)];
    let mut s = snapshot(
        vec![pool(1, 2)],
        vec![g0, group(0, 1000, 1)],
        vec![queue(0, &[0]), queue(1, &[0])],
    );
    s.running = vec![
        running(10, 0, 1000, 0, &[0], 0),
        running(11, 1, 1000, 0, &[1], 0),
    ];
    s.pending = vec![job(1, 0, 1000)];
    let d = schedule(&s);
    assert!(d.preempts.is_empty(), "{d:?}");
    assert_eq!(reason_of(&d, 1), Some(&WaitReason::NoIdleCapacity));
}
