//! Properties of the scheduling core over random clusters, replayed for many cycles: jobs
//! arrive late, finish, and preempted victims take several cycles to stop, as on a real
//! cluster. Every oracle here is written from the rules in `core`'s documentation, not by
//! calling the core: capacity and memory per device, group limits, which running jobs are
//! within their reservation, one round of victims per starving job, and work conservation.
//!
//! `world`: the generated clusters and their work; `oracles`: the documented rules, as
//! checks; `starvation`: a large job behind a stream of small ones.

mod oracles;
mod starvation;
mod world;

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::core::*;

use oracles::{
    allowed_now, behind, check_capacity, fits_somewhere, free_capacity, free_host, held_jobs,
    used_on_pools, within_reservation, KeptFor,
};
use starvation::large_job_start;
use world::{arb_world, World};

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
        let mut victims_for: HashMap<u64, u32> = HashMap::new();
        let mut preempted: HashMap<u64, u32> = HashMap::new();
        let mut admitted_since: Vec<(u32, PendingJob)> = Vec::new();
        let mut trace: Vec<String> = Vec::new();
        for cycle in 0..300u32 {
            let s = &snap;
            let inside = within_reservation(s);
            let d = schedule(s);
            trace.push(format!("DEBUG cycle {cycle} now {}\nRUNNING {:?}\nPENDING {:?}\nDEC {:?}", s.now, s.running.iter().map(|r| (r.id, r.queue, r.gpus, r.memory_mb, r.placement.node, r.placement.slices.clone(), r.preempted_for, r.started_at)).collect::<Vec<_>>(), s.pending.iter().map(|j| (j.id, j.queue, j.gpus,j.memory_mb, j.priority)).collect::<Vec<_>>(), d));
            prop_assert_eq!(d.admits.len() + d.waiting.len(), s.pending.len(), "every pending job is admitted or told why");
            // Victims: over-quota (by the oracle), preemptible, old enough, of another group.
            for p in &d.preempts {
                let r = s.running.iter().find(|r| r.id == p.victim).expect("victim runs");
                prop_assert!(!inside.contains(&r.id), "victim {} is within its group's reservation", r.id);
                prop_assert!(r.preemptible, "victim {} is not preemptible", r.id);
                // Its queue's minimum runtime (or the default), once more per earlier
                // preemption, up to four times.
                let min = s.queues[r.queue as usize].min_runtime_ms.unwrap_or(s.min_runtime_ms);
                let protection = min * (1 + r.preemptions.min(3) as i64);
                prop_assert!(s.now - r.started_at >= protection, "victim {} ({} preemptions before) is younger than its protection {}", r.id, r.preemptions, protection);
                prop_assert!(r.preempted_for.is_none(), "victim {} is already stopping", r.id);
                prop_assert_ne!(p.victim_group, p.for_group);
            }
            // One round of victims per starving job: a second only when a job ahead of it in
            // the cycle's order started meanwhile (and took what its first victims freed).
            for a in &d.admits {
                let k = s.pending.iter().find(|p| p.id == a.job).expect("admits a pending job");
                admitted_since.push((cycle, k.clone()));
            }
            let rounds: HashSet<u64> = d.preempts.iter().map(|p| p.for_job).collect();
            for j in rounds {
                let job = s.pending.iter().find(|p| p.id == j).expect("reclaims for a pending job");
                if let Some(&first) = victims_for.get(&j) {
                    let overtaken = admitted_since
                        .iter()
                        .any(|&(c, ref k)| c > first && behind(job, k));
                    prop_assert!(overtaken, "job {} got a second round of victims in cycle {}, and no job ahead of it started since its first in cycle {}\n{}", j, cycle, first, trace.join("\n"));
                }
                victims_for.insert(j, cycle);
            }
            // Holds: for a pending in-quota job of whole GPUs that waited long enough, one node
            // per job, each node once, on a node that could ever fit it.
            let heads = held_jobs(s, &d);
            let mut held: HashSet<(u32, u32)> = HashSet::new();
            let mut holders: HashSet<u64> = HashSet::new();
            for &(job, pool, node, owed) in &d.held {
                let j = s.pending.iter().find(|j| j.id == job).expect("a pending job holds");
                prop_assert!(j.gpus >= 1000, "a fraction holds a node");
                prop_assert!(s.now - j.waiting_since >= s.hold_after_ms.unwrap_or(i64::MAX), "job {} holds before its wait is up", job);
                prop_assert!(s.queues[j.queue as usize].pools.contains(&pool));
                prop_assert!(s.pools[pool as usize].nodes[node as usize].devices.len() as u32 >= j.gpus / 1000);
                prop_assert!(held.insert((pool, node)), "node held twice");
                prop_assert!(holders.insert(job), "job holds two nodes");
                let group = s.queues[j.queue as usize].group;
                // What runs, plus the reclaimed jobs placed first in this cycle.
                let running_use: u32 = s
                    .running
                    .iter()
                    .filter(|r| s.queues[r.queue as usize].group == group)
                    .map(|r| r.gpus)
                    .sum::<u32>()
                    + d.admits
                        .iter()
                        .filter(|a| s.reclaimed_for.contains(&a.job))
                        .filter_map(|a| s.pending.iter().find(|p| p.id == a.job))
                        .filter(|p| s.queues[p.queue as usize].group == group)
                        .map(|p| p.gpus)
                        .sum::<u32>();
                prop_assert_eq!(owed, running_use + j.gpus <= s.groups[group as usize].reservation, "job {} holds as owed: {}", job, owed);
                prop_assert!(heads.values().any(|&h| h == job), "job {} holds a node but is not its group's held job: {:?}\n{}", job, heads, trace.join("\n"));
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
                    cpu_milli: j.cpu_milli,
                    ram_mb: j.ram_mb,
                    placement: a.placement.clone(),
                    started_at: next.now,
                    preempted_for: None,
                    preempted_for_job: None,
                    preemptions: preempted.get(&j.id).copied().unwrap_or(0),
                });
            }
            for p in &d.preempts {
                let r = next.running.iter_mut().find(|r| r.id == p.victim).expect("victim runs");
                r.preempted_for = Some(p.for_group);
                r.preempted_for_job = Some(p.for_job);
                stopping.push(Stopping { job: r.clone(), cycles_left: stop_delay });
            }
            if let Err(e) = check_capacity(&next) { eprintln!("DEBUG cycle {cycle}\nRUNNING {:?}\nPENDING {:?}\nDEC {:?}", s.running, s.pending.iter().map(|j| (j.id,j.gpus,j.memory_mb)).collect::<Vec<_>>(), d); return Err(e); }

            // Work conservation: after the cycle's admissions, no waiting job fits on free
            // capacity within what its group may use.
            {
                let free = free_capacity(&next);
                let host = free_host(&next);
                let on_pools = used_on_pools(&next);
                let mut used = vec![0u32; next.groups.len()];
                // Who each node is kept for: victims still stopping keep theirs for the job
                // they stop for (while it waits; else for its group), and held jobs theirs.
                // (job, group, soft): a soft hold (a starving job's) lets in-quota jobs pass.
                let mut kept: HashMap<(u32, u32), Vec<KeptFor>> = HashMap::new();
                for r in &next.running {
                    used[next.queues[r.queue as usize].group as usize] += r.gpus;
                }
                // A job whose victims stop for it has its share spoken for.
                let spoken: HashSet<u64> = s
                    .running
                    .iter()
                    .filter_map(|r| r.preempted_for_job)
                    .chain(d.preempts.iter().map(|p| p.for_job))
                    .collect();
                for j in next.pending.iter().filter(|j| spoken.contains(&j.id)) {
                    used[next.queues[j.queue as usize].group as usize] += j.gpus;
                }
                for r in &s.running {
                    if let Some(g) = r.preempted_for {
                        let for_waiting = r.preempted_for_job.filter(|j| s.pending.iter().any(|p| p.id == *j));
                        let who = match for_waiting { Some(j) => (Some(j), None, false), None => (None, Some(g), false) };
                        kept.entry((r.placement.pool, r.placement.node)).or_default().push(who);
                    }
                }
                for p in &d.preempts {
                    let r = s.running.iter().find(|r| r.id == p.victim).expect("victim runs");
                    kept.entry((r.placement.pool, r.placement.node)).or_default().push((Some(p.for_job), None, false));
                }
                for &(job, pool, node, owed) in &d.held {
                    // The held job's group may use it (its jobs behind it are skipped above).
                    let g = s.queues[s.pending.iter().find(|p| p.id == job).expect("held job waits").queue as usize].group;
                    kept.entry((pool, node)).or_default().push((Some(job), Some(g), !owed));
                }
                for j in &next.pending {
                    let group = next.queues[j.queue as usize].group;
                    // Behind its group's held job (which was pending at the cycle's start).
                    let waits_for_head = heads.get(&group).is_some_and(|&h| {
                        h != j.id && s.pending.iter().any(|x| x.id == h && behind(j, x))
                    });
                    if waits_for_head {
                        continue;
                    }
                    let g = &next.groups[group as usize];
                    // Within its reservation on a pool: overall, and there if it has a quota there.
                    let in_quota = |pool: u32| {
                        used[group as usize] + j.gpus <= g.reservation
                            && g.pool_quotas.iter().find(|q| q.pool == pool).is_none_or(|q| {
                                on_pools.get(&(group, pool)).copied().unwrap_or(0) + j.gpus <= q.reservation
                            })
                    };
                    let closed: HashSet<(u32, u32)> = kept
                        .iter()
                        .filter(|((pool, _), who)| {
                            // Closed unless every holder lets it in.
                            !who.iter().all(|&(job, g, soft)| {
                                job == Some(j.id) || g == Some(group) || (soft && in_quota(*pool))
                            })
                        })
                        .map(|(k, _)| *k)
                        .collect();
                    prop_assert!(
                        !(allowed_now(&next, &used, j) && fits_somewhere(&next, &free, &host, &closed, &used, j)),
                        "cycle {}: job {} ({} milli, {} MiB) waits with room for it: {:?}\n{}",
                        cycle, j.id, j.gpus, j.memory_mb,
                        d.waiting.iter().find(|(id, _)| *id == j.id), trace.join("\n")
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
            next.reclaimed_for.clear();
            for id in &gone {
                let stopped = next.running.iter().find(|r| r.id == *id).expect("stopping job runs");
                if let Some(j) = stopped.preempted_for_job {
                    let others_stopping = next.running.iter().any(|o| {
                        o.preempted_for_job == Some(j) && !gone.contains(&o.id)
                    });
                    if !others_stopping && next.pending.iter().any(|p| p.id == j) && !next.reclaimed_for.contains(&j) {
                        next.reclaimed_for.push(j);
                    }
                }
            }
            for id in &gone {
                let r = next.running.iter().find(|r| r.id == *id).expect("stopping job runs").clone();
                *preempted.entry(r.id).or_default() += 1;
                next.pending.push(PendingJob {
                    id: r.id,
                    queue: r.queue,
                    priority: r.priority,
                    preemptible: r.preemptible,
                    may_exceed: true,
                    gpus: r.gpus,
                    memory_mb: r.memory_mb,
                    cpu_milli: r.cpu_milli,
                    ram_mb: r.ram_mb,
                    submitted_at: r.started_at,
                    waiting_since: next.now,
                });
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// No starvation: however the small jobs arrive and however long they run (up to 6
    /// cycles), the large job starts within the hold threshold plus the longest run.
    #[test]
    fn a_large_job_starts_within_a_bounded_wait_behind_a_stream_of_small_ones(
        nodes in 1usize..4,
        devices in 2usize..9,
        arrivals in prop::collection::vec(1u8..6, 1..20),
        runs in prop::collection::vec(0u8..6, 1..20),
    ) {
        // Holding starts after 5 cycles (50 ms at 10 ms a cycle); runs end within 6 more.
        let started = large_job_start(nodes, devices, &arrivals, &runs, Some(50), 200);
        prop_assert!(matches!(started, Some(c) if c <= 5 + 6 + 1), "the large job started in cycle {:?}", started);
    }
}

#[test]
fn without_holding_a_stream_of_small_jobs_starves_a_large_one() {
    // The case the hold exists for: every freed GPU is taken by a newly arrived small job
    // before the node has room for the large one.
    assert_eq!(large_job_start(2, 8, &[8], &[0, 2, 1, 3], None, 500), None);
    assert!(large_job_start(2, 8, &[8], &[0, 2, 1, 3], Some(50), 500).is_some());
}
