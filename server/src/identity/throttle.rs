//! Login throttling against password guessing: a sliding window of failures per account
//! (tenant + username) and per source address. Pure: time is a parameter.
//!
//! An attempt is [`reserve`](Throttle::reserve)d — counted as a failure — *before* the password
//! is checked, in one step under the lock, so however many guesses arrive at once, at most the
//! budget of them is ever checked; a success then gives its slot back
//! ([`success`](Throttle::success)) and clears the account's window.
//!
//! Kept in memory per replica; a guesser spread over replicas gets at most replicas × the
//! budget, which still stops online guessing.

use std::collections::{HashMap, VecDeque};

use super::secret::digest;

/// The account a password sign-in counts against.
///
/// * `tenant/username`, plus a fingerprint of the account's current password hash when it has
///   one: a password reset (`switchyard admin reset-password`, or an admin setting a new one)
///   starts a fresh window, so the reset is a way back in for a locked-out user.
/// * Platform admins' windows are per account **and address**: a stranger guessing at `root`
///   from their address locks `root` out from that address only, never from the operators'
///   own (nor from the server's host), so nobody can lock the platform's administrators out.
///   A guesser gets the per-account budget once per address they control, still within each
///   address's own budget across all accounts (`max_per_source`).
pub fn account_key(
    tenant: &str,
    username: &str,
    password_hash: Option<&str>,
    platform_admin: bool,
    source: &str,
) -> String {
    let mut key = format!("{tenant}/{username}");
    if let Some(h) = password_hash {
        key.push('#');
        key.push_str(&digest(h)[..16]);
    }
    if platform_admin {
        key.push('@');
        key.push_str(source);
    }
    key
}

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

    /// Checks and, when allowed, counts this attempt as a failure in the same step
    /// (`Err(seconds)` as [`check`](Throttle::check)). Concurrent attempts cannot all pass
    /// the check before any of them is counted.
    pub fn reserve(&mut self, account: &str, source: &str, now: i64) -> Result<(), u64> {
        self.check(account, source, now)?;
        self.failure(account, source, now);
        Ok(())
    }

    /// Gives back a reservation made at `at` that turned out not to be a wrong password (the
    /// check could not be made): it no longer counts for the account or the source.
    pub fn release(&mut self, account: &str, source: &str, at: i64) {
        for (map, key) in [(&mut self.accounts, account), (&mut self.sources, source)] {
            if let Some(q) = map.get_mut(key) {
                if let Some(i) = q.iter().rposition(|&t| t == at) {
                    q.remove(i);
                }
            }
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

    /// A right password: the account's window is cleared, and the source's slot reserved at
    /// `at` is given back (signing in does not use up an address's budget).
    pub fn success(&mut self, account: &str, source: &str, at: i64) {
        self.release(account, source, at);
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
        t.success("a", "ip", 99);
        assert!(t.check("a", "ip", 2).is_ok());
        t.failure("b", "ip", 3);
        assert!(t.check("c", "ip", 4).is_err(), "source budget of 3 spent");
    }

    #[test]
    fn account_keys() {
        assert_eq!(
            account_key("acme", "bob", None, false, "1.2.3.4"),
            "acme/bob"
        );
        let a = account_key("acme", "bob", Some("$argon2id$a"), false, "1.2.3.4");
        let b = account_key("acme", "bob", Some("$argon2id$b"), false, "5.6.7.8");
        assert!(
            a.starts_with("acme/bob#") && a != b,
            "a new password, a new window"
        );
        assert_eq!(
            a,
            account_key("acme", "bob", Some("$argon2id$a"), false, "9.9.9.9")
        );
        let root = |ip| account_key("platform", "root", Some("$argon2id$r"), true, ip);
        assert_ne!(
            root("1.2.3.4"),
            root("127.0.0.1"),
            "platform admins: per address"
        );
    }

    #[test]
    fn reservations_are_counted_before_the_answer() {
        let mut t = Throttle::new(ThrottlePolicy::default());
        // Forty attempts at the same instant (none answered yet): five get through.
        let passed = (0..40)
            .filter(|_| t.reserve("acme/alice", "1.2.3.4", 0).is_ok())
            .count();
        assert_eq!(passed, 5);
        // A right password among them gives its source slot back and clears the account.
        let mut t = Throttle::new(ThrottlePolicy::default());
        t.reserve("acme/bob", "ip", 10).expect("free");
        t.reserve("acme/bob", "ip", 11).expect("free");
        t.success("acme/bob", "ip", 11);
        assert_eq!(t.sources["ip"].len(), 1, "only the wrong one counts");
        assert!(!t.accounts.contains_key("acme/bob"));
        // A check that could not be made gives the whole reservation back.
        t.reserve("acme/carol", "ip2", 20).expect("free");
        t.release("acme/carol", "ip2", 20);
        assert!(t.accounts["acme/carol"].is_empty() && t.sources["ip2"].is_empty());
    }
}
