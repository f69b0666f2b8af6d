//! What a waiting job that does not fit lacks ([`Short`]), found at the end of a cycle.

use super::capacity::PoolState;
use super::*;

/// Whether no node of the job's pools could hold it even with nothing running there.
pub(super) fn never_fits(s: &Snapshot, job: &PendingJob) -> bool {
    let Some(q) = s.queues.get(job.queue as usize) else {
        return true;
    };
    let declared = |have: u32, want: u32| have == 0 || want <= have;
    !q.pools
        .iter()
        .filter_map(|&p| s.pools.get(p as usize))
        .flat_map(|p| &p.nodes)
        .any(|n| {
            let gpus = if job.gpus < WHOLE {
                n.devices.iter().any(|d| job.memory_mb <= d.memory_mb)
            } else {
                n.devices.len() as u64 * WHOLE as u64 >= job.gpus as u64
            };
            gpus && declared(n.cpu_milli, job.cpu_milli) && declared(n.ram_mb, job.ram_mb)
        })
}

/// Finds out what waiting jobs that do not fit lack, once per pool list and request.
#[derive(Default)]
pub(super) struct Diagnosis {
    seen: std::collections::HashMap<(u32, Demand), Short>,
    /// Per queue, the index of its pool list among the distinct ones (queues share them).
    pool_list: Vec<Option<u32>>,
    lists: std::collections::HashMap<Vec<u32>, u32>,
    /// Per pool, when the first protected borrower becomes reclaimable (computed once).
    protected: Option<Vec<Option<i64>>>,
}

impl Diagnosis {
    pub(super) fn short(&mut self, s: &Snapshot, pools: &[PoolState], job: &PendingJob) -> Short {
        let Some(q) = s.queues.get(job.queue as usize) else {
            return Short::Gpus;
        };
        if self.pool_list.len() < s.queues.len() {
            self.pool_list = vec![None; s.queues.len()];
        }
        let list = match self.pool_list[job.queue as usize] {
            Some(l) => l,
            None => {
                let next = self.lists.len() as u32;
                let l = *self.lists.entry(q.pools.clone()).or_insert(next);
                self.pool_list[job.queue as usize] = Some(l);
                l
            }
        };
        let key = (list, job.demand());
        if let Some(&v) = self.seen.get(&key) {
            return v;
        }
        let mut best = Short::Gpus;
        for &p in &q.pools {
            if let Some(ps) = pools.get(p as usize) {
                let v = ps.short(&job.demand());
                if v.closeness() > best.closeness() {
                    best = v;
                }
            }
        }
        if matches!(best, Short::Gpus | Short::Fragmented) {
            let protected = self.protected.get_or_insert_with(|| {
                let over = over_quota_jobs(s);
                let mut until = vec![None; s.pools.len()];
                for (r, _) in s.running.iter().zip(&over).filter(|(_, &o)| o) {
                    let t = protected_until(s, r);
                    if r.preemptible && r.preempted_for.is_none() && s.now < t {
                        let slot: &mut Option<i64> = &mut until[r.placement.pool as usize];
                        *slot = Some(slot.map_or(t, |u: i64| u.min(t)));
                    }
                }
                until
            });
            if let Some(until) = q
                .pools
                .iter()
                .filter_map(|&p| protected.get(p as usize).copied().flatten())
                .min()
            {
                best = Short::Protected { until };
            }
        }
        self.seen.insert(key, best);
        best
    }
}
