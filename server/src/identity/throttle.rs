//! Login throttling against password guessing: a sliding window of failures per account
//! (tenant + username) and per source address. Pure: time is a parameter.
//!
//! Kept in memory per replica; a guesser spread over replicas gets at most replicas × the
//! budget, which still stops online guessing. Successful sign-in clears the account's window.

use std::collections::{HashMap, VecDeque};

#[derive(Clone, Debug)]
pub struct ThrottlePolicy {
    pub window_ms: i64,
    pub max_per_account: usize,
    pub max_per_source: usize,
}

impl Default for ThrottlePolicy {
    fn default() -> Self {
        ThrottlePolicy {
            window_ms: 15 * 60 * 1000,
            max_per_account: 5,
            max_per_source: 20,
        }
    }
}

#[derive(Default)]
pub struct Throttle {
    policy: ThrottlePolicy,
    accounts: HashMap<String, VecDeque<i64>>,
    sources: HashMap<String, VecDeque<i64>>,
}

fn prune(q: &mut VecDeque<i64>, now: i64, window: i64) {
    while q.front().is_some_and(|&t| t <= now - window) {
        q.pop_front();
    }
}

impl Throttle {
    pub fn new(policy: ThrottlePolicy) -> Self {
        Throttle {
            policy,
            ..Default::default()
        }
    }

    /// `Err(seconds)` when this account or source must wait before trying again.
    pub fn check(&mut self, account: &str, source: &str, now: i64) -> Result<(), u64> {
        let w = self.policy.window_ms;
        let mut wait = 0i64;
        for (map, key, max) in [
            (&mut self.accounts, account, self.policy.max_per_account),
            (&mut self.sources, source, self.policy.max_per_source),
        ] {
            if let Some(q) = map.get_mut(key) {
                prune(q, now, w);
                if q.len() >= max {
                    // Free again when the oldest failure that counts leaves the window.
                    let oldest = q[q.len() - max];
                    wait = wait.max(oldest + w - now);
                }
            }
        }
        if wait > 0 {
            Err(((wait + 999) / 1000) as u64)
        } else {
            Ok(())
        }
    }

    pub fn failure(&mut self, account: &str, source: &str, now: i64) {
        self.accounts
            .entry(account.to_string())
            .or_default()
            .push_back(now);
        self.sources
            .entry(source.to_string())
            .or_default()
            .push_back(now);
        // Bound memory: forget idle keys now and then.
        if self.accounts.len() > 100_000 || self.sources.len() > 100_000 {
            let w = self.policy.window_ms;
            self.accounts
                .retain(|_, q| q.back().is_some_and(|&t| t > now - w));
            self.sources
                .retain(|_, q| q.back().is_some_and(|&t| t > now - w));
        }
    }

    pub fn success(&mut self, account: &str) {
        self.accounts.remove(account);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_budget_and_frees_after_the_window() {
        let mut t = Throttle::new(ThrottlePolicy::default());
        let min = 60_000;
        for i in 0..5 {
            assert!(t.check("acme/alice", "1.2.3.4", i * min).is_ok());
            t.failure("acme/alice", "1.2.3.4", i * min);
        }
        // Sixth try at minute 5: the first failure (minute 0) leaves the window at minute 15.
        assert_eq!(t.check("acme/alice", "1.2.3.4", 5 * min), Err(600));
        // Another account from another address is not affected.
        assert!(t.check("acme/bob", "5.6.7.8", 5 * min).is_ok());
        assert!(t.check("acme/alice", "9.9.9.9", 15 * min + 1).is_ok());
    }

    #[test]
    fn success_clears_the_account_but_not_the_source() {
        let mut t = Throttle::new(ThrottlePolicy {
            window_ms: 1000,
            max_per_account: 2,
            max_per_source: 3,
        });
        t.failure("a", "ip", 0);
        t.failure("a", "ip", 1);
        assert!(t.check("a", "ip", 2).is_err());
        t.success("a");
        assert!(t.check("a", "ip", 2).is_ok());
        t.failure("b", "ip", 3);
        assert!(t.check("c", "ip", 4).is_err(), "source budget of 3 spent");
    }
}
