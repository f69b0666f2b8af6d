//! The wall clock, read only at the edges.
//!
//! Domain code never reads the system time: a write transaction carries the time it began
//! (`WriteTx::now`), reads take `now` as a parameter, and the edges (handlers,
//! the driver loop, the CLI) ask the store's clock (`Store::now`). Tests put a
//! [`Clock::manual`] into the store and move it, so session lifetimes, token expiry, runtime
//! limits and throttle windows are tested without waiting. `clippy.toml` forbids
//! `SystemTime::now` everywhere else.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Milliseconds since the Unix epoch, from the system or from a test's hand.
#[derive(Clone, Debug, Default)]
pub struct Clock(Option<Arc<AtomicI64>>);

impl Clock {
    /// The system's wall clock (what the server runs with).
    pub fn system() -> Clock {
        Clock(None)
    }

    /// A clock that stands still at `start_ms` until it is moved ([`Clock::advance`]).
    pub fn manual(start_ms: i64) -> Clock {
        Clock(Some(Arc::new(AtomicI64::new(start_ms))))
    }

    pub fn now_ms(&self) -> i64 {
        match &self.0 {
            Some(t) => t.load(Ordering::SeqCst),
            None => system_ms(),
        }
    }

    /// Moves a manual clock forward by `ms`; the system clock cannot be moved (false).
    pub fn advance(&self, ms: i64) -> bool {
        match &self.0 {
            Some(t) => {
                t.fetch_add(ms, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }
}

#[allow(clippy::disallowed_methods)]
fn system_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_its_clones_follow() {
        let c = Clock::manual(1_000);
        let seen_by_store = c.clone();
        assert_eq!(seen_by_store.now_ms(), 1_000);
        assert!(c.advance(60_000));
        assert_eq!(seen_by_store.now_ms(), 61_000);
        assert!(Clock::system().now_ms() > 1_700_000_000_000);
        assert!(!Clock::system().advance(1));
    }
}
