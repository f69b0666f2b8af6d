//! Phase 3: an in-quota job that did not fit takes capacity back from over-quota jobs of other
//! groups (see the module documentation of `core` for the order of victims). Phase 4 uses the
//! same steps for borrowers of groups below their weighted fair share (see "Fair share").

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::capacity::{Asker, Holder, PoolState};
use super::*;

/// Which claims a reclaim round serves.
#[derive(Clone, Copy)]
pub(super) enum Claim<'a> {
    /// In-quota jobs: any over-quota job of another group may be a victim.
    Reservation,
    /// Borrowers of groups below their fair share (`fair`, over-quota milli-GPUs per group):
    /// a victim's group must stay at or above its own share once the victim has stopped.
    FairShare(&'a [u64]),
}

pub(super) fn reclaim(
    s: &Snapshot,
    pools: &mut [PoolState],
    groups: &mut [GroupState],
    starving: &[usize],
    claim: Claim,
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
    // Victims stopping for a job that still waits count for that job alone; others (their
    // job is unknown or gone) for their group.
    let waiting: std::collections::HashSet<u64> = s.pending.iter().map(|j| j.id).collect();
    let mut inflight = vec![0u64; s.groups.len()];
    let mut inflight_job: std::collections::HashMap<u64, u64> = Default::default();
    for r in &s.running {
        if let Some(g) = r.preempted_for {
            match r.preempted_for_job {
                Some(j) if waiting.contains(&j) => {
                    *inflight_job.entry(j).or_default() += r.gpus as u64
                }
                _ => {
                    if let Some(slot) = inflight.get_mut(g as usize) {
                        *slot += r.gpus as u64;
                    }
                }
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
            && s.now >= protected_until(s, r)
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
        // Later jobs of its group (backfill) may have taken what was left of the reservation
        // in this cycle: then it is no longer owed capacity, and nothing is preempted for it.
        let in_quota = matches!(claim, Claim::Reservation);
        if let Claim::FairShare(fair) = claim {
            // Earlier claims of its group in this cycle may have brought it to its share.
            if over(groups[g].used, s.groups[g].reservation) as u64 + job.gpus as u64 > fair[g] {
                continue;
            }
        }
        if in_quota
            && groups[g].used + job.gpus > s.groups[g].reservation
            && !inflight_job.contains_key(&job.id)
        {
            reason[i] = Some(WaitReason::QuotaExhausted {
                used: groups[g].used,
                reservation: s.groups[g].reservation,
            });
            continue;
        }
        if inflight_job.contains_key(&job.id) {
            // Its victims are still stopping: it waits for them, and no second round.
            reason[i] = Some(WaitReason::WaitingForPreemption {
                victims: Vec::new(),
            });
            continue;
        }
        if inflight[g] >= job.gpus as u64 {
            inflight[g] -= job.gpus as u64;
            reason[i] = Some(WaitReason::WaitingForPreemption {
                victims: Vec::new(),
            });
            continue;
        }
        // Reclaimable plus what is free already (a job may need both).
        let available: u64 = q
            .pools
            .iter()
            .map(|&p| reclaimable[p as usize] + pools[p as usize].free_total())
            .sum();
        let fails_early = available < job.gpus as u64
            || failed.iter().any(|(p, k)| p == &q.pools && job.gpus >= *k);
        if fails_early {
            if in_quota {
                reason[i] = Some(NO_CAPACITY);
            }
            continue;
        }
        let asker = Asker {
            job: job.id,
            group: g as u32,
            in_quota,
        };
        // Cursor moves of this attempt, undone if it fails (not a copy of every cursor per job).
        let mut moved: Vec<(usize, usize)> = Vec::new();
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
                moved.push((vg, cursor[vg]));
                cursor[vg] += 1;
                let r = &s.running[v];
                let keeps_share = match claim {
                    Claim::Reservation => true,
                    Claim::FairShare(fair) => {
                        over(groups[vg].used - r.gpus, s.groups[vg].reservation) as u64 >= fair[vg]
                    }
                };
                // Only where its group's pool quota lets the job in (within its
                // reservation there for an in-quota claim).
                let pool = r.placement.pool;
                let allowed = groups[g].allows(&s.groups[g], pool, job.gpus, in_quota);
                if !taken[v] && keeps_share && allowed && q.pools.contains(&pool) {
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
            pools[r.placement.pool as usize].apply(&r.placement, &r.demand(), -1);
            groups[vg].place(r.placement.pool, r.gpus, -1);
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
                &job.demand(),
                asker,
            );
            if fit.is_some() {
                break;
            }
        }
        heap.extend(skipped);
        let Some(mut pl) = fit else {
            for &v in &chosen {
                let r = &s.running[v];
                pools[r.placement.pool as usize].apply(&r.placement, &r.demand(), 1);
                groups[group_of(r.queue)].place(r.placement.pool, r.gpus, 1);
            }
            for &(vg, at) in moved.iter().rev() {
                cursor[vg] = at;
            }
            for g2 in chosen.iter().map(|&v| group_of(s.running[v].queue)) {
                let (num, w) = share(g2, groups);
                heap.push(Entry { num, w, group: g2 });
            }
            failed.push((q.pools.clone(), job.gpus));
            if in_quota {
                reason[i] = Some(NO_CAPACITY);
            }
            continue;
        };
        // Drop victims that turned out unneeded (latest first): those on other nodes, then any
        // whose return still leaves room on the chosen node.
        let mut kept = Vec::new();
        for &v in chosen.iter().rev() {
            let r = &s.running[v];
            let vg = group_of(r.queue);
            let ps = &mut pools[r.placement.pool as usize];
            ps.apply(&r.placement, &r.demand(), 1);
            let same_node = r.placement.pool == pl.pool && r.placement.node == pl.node;
            if same_node {
                if let Some(p) = ps.find_on(pl.pool, pl.node as usize, &job.demand(), asker) {
                    pl = p;
                } else {
                    ps.apply(&r.placement, &r.demand(), -1);
                    kept.push(v);
                    continue;
                }
            }
            groups[vg].place(r.placement.pool, r.gpus, 1);
            // Examined once per cycle: an unneeded victim is a candidate again next cycle.
            reclaimable[r.placement.pool as usize] -= r.gpus as u64;
            let (num, w) = share(vg, groups);
            heap.push(Entry { num, w, group: vg });
        }
        // The victims hold their devices until they have stopped, so what they free is not
        // free in this cycle: they stay allocated (and counted in their group), the job is
        // not placed yet, and the node is held for the job, so that no other job
        // takes the room beside the victims that the job needs too.
        pools[pl.pool as usize].hold(pl.node as usize, Holder::Reclaim(job.id));
        groups[g].place(pl.pool, job.gpus, 1);
        let mut ids = Vec::with_capacity(kept.len());
        for v in kept {
            let r = &s.running[v];
            let vg = group_of(r.queue);
            pools[r.placement.pool as usize].apply(&r.placement, &r.demand(), 1);
            groups[vg].place(r.placement.pool, r.gpus, 1);
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
