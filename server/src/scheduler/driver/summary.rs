//! What the pages show of the scheduler's state, published by the leading driver each time it
//! has brought its snapshot up to date: per group, pool and queue counts, so that the Policy
//! Manager, the portal and the overview API read a few numbers instead of loading every live
//! job. The counts are those of the snapshot the core decides on, so "over quota" means
//! exactly what the core means by it.
//!
//! A summary says which scheduling changes it includes (the store's
//! [`scheduling_generation`](crate::store::Store::scheduling_generation) read before the
//! snapshot was refreshed). A reader waits briefly for one that includes every change
//! committed before its request (its own submit, say), and loads the snapshot itself when
//! none comes: no driver in this process (the CLI, a test without one), a replica standing
//! by, or a driver that is stuck.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::core;
use super::snapshot::Loaded;
use super::SchedulerHandle;
use crate::store::Store;

/// How long a page waits for a summary that includes the changes before it.
const FRESH_WAIT: Duration = Duration::from_secs(2);

/// One group's use: milli-GPUs used and over its quota, running and waiting jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupUse {
    pub used_milli: i64,
    pub over_quota_milli: i64,
    pub running: i64,
    pub waiting: i64,
}

/// The scheduler's state in counts, over every tenant (readers keep to their own groups and
/// queues; pools show totals).
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The store's scheduling generation this summary includes.
    pub generation: u64,
    /// By group id.
    pub groups: HashMap<String, GroupUse>,
    /// By pool id: milli-GPUs in use within quota and over quota.
    pub pools: HashMap<String, (i64, i64)>,
    /// By queue id: live jobs running (admitted to stopping) and waiting.
    pub queues: HashMap<String, (i64, i64)>,
    /// Pool names by id.
    pub pool_names: HashMap<String, String>,
}

impl Summary {
    /// The counts of a loaded snapshot (counted by index: no allocation per job).
    pub(crate) fn of(l: &Loaded, generation: u64) -> Summary {
        let over = core::over_quota_jobs(&l.snap);
        let mut groups = vec![GroupUse::default(); l.groups.len()];
        let mut pools = vec![(0i64, 0i64); l.pool_ids.len()];
        for (i, r) in l.snap.running.iter().enumerate() {
            let g = &mut groups[l.queue_group[r.queue as usize] as usize];
            let pool = &mut pools[r.placement.pool as usize];
            let gpus = r.gpus as i64;
            g.used_milli += gpus;
            g.running += 1;
            if over[i] {
                g.over_quota_milli += gpus;
                pool.1 += gpus;
            } else {
                pool.0 += gpus;
            }
        }
        for pj in &l.snap.pending {
            groups[l.queue_group[pj.queue as usize] as usize].waiting += 1;
        }
        // Live jobs by queue, also those of a queue the core does not know (deleted).
        let mut queues = vec![(0i64, 0i64); l.queue_group.len()];
        let mut unknown: HashMap<String, (i64, i64)> = HashMap::new();
        for j in &l.jobs {
            let e = match j.queue {
                Some(q) => &mut queues[q as usize],
                None => unknown.entry(j.queue_id.clone()).or_default(),
            };
            if j.state == app::model::JobState::Queued {
                e.1 += 1;
            } else {
                e.0 += 1;
            }
        }
        for (id, &q) in &l.queue_index {
            unknown.insert(id.clone(), queues[q as usize]);
        }
        Summary {
            generation,
            groups: l
                .groups
                .iter()
                .zip(groups)
                .map(|(g, u)| (g.id.clone(), u))
                .collect(),
            pools: l.pool_ids.iter().cloned().zip(pools).collect(),
            queues: unknown,
            pool_names: l
                .pool_ids
                .iter()
                .cloned()
                .zip(l.pool_names.iter().cloned())
                .collect(),
        }
    }
}

impl SchedulerHandle {
    /// Publishes what the driver's snapshot counts now.
    pub(crate) fn publish(&self, summary: Summary) {
        self.summary.send_replace(Some(Arc::new(summary)));
    }

    /// Says the published counts include the scheduling changes up to `generation` (a quiet
    /// cycle found that none of them changed what the counts are made of).
    pub(crate) fn renew_summary(&self, generation: u64) {
        self.summary.send_if_modified(|s| match s {
            Some(cur) if cur.generation < generation => {
                let mut next = Summary::clone(cur);
                next.generation = generation;
                *s = Some(Arc::new(next));
                true
            }
            _ => false,
        });
    }

    /// Withdraws the summary (the driver stopped leading: it would only grow stale).
    pub(crate) fn withdraw(&self) {
        self.summary.send_replace(None);
    }

    /// A summary that includes every scheduling change this process committed before the
    /// call, once the driver has published one (waiting up to two seconds); `None` when no
    /// driver leads in this process or none came in time: then the caller loads the
    /// snapshot itself.
    pub async fn summary(&self, store: &Store) -> Option<Arc<Summary>> {
        let want = store.scheduling_generation();
        let mut rx = self.summary.subscribe();
        {
            let now = rx.borrow_and_update();
            match now.as_ref() {
                None => return None,
                Some(s) if s.generation >= want => return Some(s.clone()),
                Some(_) => {}
            }
        }
        let fresh = tokio::time::timeout(
            FRESH_WAIT,
            rx.wait_for(|s| s.as_ref().is_none_or(|s| s.generation >= want)),
        )
        .await;
        match fresh {
            Ok(Ok(s)) => s.clone(),
            _ => None,
        }
    }
}
