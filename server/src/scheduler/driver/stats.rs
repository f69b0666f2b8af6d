//! The driver's counters: cycles (quiet ones apart), admissions, preemptions, executor events
//! and the durations of the recent cycles, for the benches and the debug log.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Stats {
    /// Cycles run, quiet ones included.
    pub cycles: AtomicU64,
    /// Cycles that found nothing changed since a settled one (see `live::Refreshed::Quiet`).
    pub quiet_cycles: AtomicU64,
    pub last_cycle_us: AtomicU64,
    pub admitted: AtomicU64,
    pub preempted: AtomicU64,
    pub events: AtomicU64,
    /// The durations of the last [`RECENT_CYCLES`] cycles that ran the core (snapshot, core,
    /// commit, launch and stops), oldest first.
    recent_cycles_us: std::sync::Mutex<std::collections::VecDeque<u64>>,
}

/// How many cycle durations [`Stats`] keeps.
pub const RECENT_CYCLES: usize = 1024;

impl Stats {
    /// Counts a cycle; a quiet one (`full` false: nothing changed, the core not run) is not
    /// among the recent durations.
    pub(super) fn record_cycle(&self, us: u64, full: bool) {
        self.cycles.fetch_add(1, Ordering::Relaxed);
        if !full {
            self.quiet_cycles.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.last_cycle_us.store(us, Ordering::Relaxed);
        if let Ok(mut r) = self.recent_cycles_us.lock() {
            if r.len() == RECENT_CYCLES {
                r.pop_front();
            }
            r.push_back(us);
        }
    }

    /// The durations of the recent cycles in microseconds, oldest first; `clear` forgets them.
    pub fn recent_cycles_us(&self, clear: bool) -> Vec<u64> {
        match self.recent_cycles_us.lock() {
            Ok(mut r) => {
                let out = r.iter().copied().collect();
                if clear {
                    r.clear();
                }
                out
            }
            Err(_) => Vec::new(),
        }
    }
}
