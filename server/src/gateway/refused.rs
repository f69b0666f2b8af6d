//! Why gateway listeners could not start (a certificate that cannot be read, a port taken),
//! kept so that the reconcile loop, which tries again every few seconds, logs each failure
//! once rather than at every try.

use std::collections::HashMap;

/// A listener: a gateway's (by id) or a raw TCP route's (by port).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) enum Key {
    Gateway(String),
    Tcp(u16),
}

/// Why each listener that could not start did not, as last logged.
#[derive(Default)]
pub(super) struct Refused(HashMap<Key, String>);

impl Refused {
    pub(super) fn gateway(id: &str) -> Key {
        Key::Gateway(id.to_string())
    }

    pub(super) fn tcp(port: u16) -> Key {
        Key::Tcp(port)
    }

    /// Notes that `key`'s listener failed to start because of `why`; whether that is news
    /// (not the failure noted for it just before).
    pub(super) fn note(&mut self, key: &Key, why: &str) -> bool {
        if self.0.get(key).map(String::as_str) == Some(why) {
            return false;
        }
        self.0.insert(key.clone(), why.to_string());
        true
    }

    /// Notes that `key`'s listener started: its next failure is news again.
    pub(super) fn started(&mut self, key: &Key) {
        self.0.remove(key);
    }

    /// Forgets the listeners for which `keep` is false.
    pub(super) fn keep(&mut self, keep: impl Fn(&Key) -> bool) {
        self.0.retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_failure_is_news_once_until_it_changes_or_the_listener_starts() {
        let mut r = Refused::default();
        let (a, b) = (Refused::gateway("g1"), Refused::tcp(18500));
        assert!(r.note(&a, "certificate unreadable"));
        assert!(
            !r.note(&a, "certificate unreadable"),
            "the same failure again"
        );
        assert!(r.note(&b, "certificate unreadable"), "another listener's");
        assert!(r.note(&a, "address in use"), "a new reason");
        r.started(&a);
        assert!(
            r.note(&a, "address in use"),
            "failing again after it started"
        );
        r.keep(|k| *k != a);
        assert!(r.note(&a, "address in use"), "forgotten with its gateway");
        assert!(!r.note(&b, "certificate unreadable"));
    }
}
