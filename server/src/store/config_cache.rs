//! Configuration read on every submit (a queue, its profile, its pools' shapes) remembered
//! between requests, and forgotten by every commit that changes configuration.
//!
//! A transaction that changes queues, profiles, pools, grants or groups says so
//! ([`WriteTx::config_changed`](super::WriteTx::config_changed)); its commit moves the
//! generation on and empties the cache. An entry is stored with the generation read *before*
//! the reads that made it, so a change committed while they ran leaves it stale at once. Other
//! processes' changes (several replicas on one PostgreSQL) reach this one's cache after at most
//! [`TTL`].

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long an entry is trusted without a local change: the bound on seeing another process's.
pub const TTL: Duration = Duration::from_secs(2);

/// Entries by (tenant, key), each any type (the owner of the reads decides what it keeps).
#[derive(Default)]
pub struct ConfigCache {
    generation: AtomicU64,
    entries: Mutex<HashMap<(String, String), Entry>>,
}

struct Entry {
    generation: u64,
    at: Instant,
    value: Arc<dyn Any + Send + Sync>,
}

impl ConfigCache {
    fn entries(&self) -> MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The generation to pass to [`ConfigCache::put`]: read it before the reads.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The entry of `tenant` and `key`, if no change was committed since it was read.
    pub fn get<T: Any + Send + Sync>(&self, tenant: &str, key: &str) -> Option<Arc<T>> {
        let now = self.generation();
        let entries = self.entries();
        let e = entries.get(&(tenant.to_string(), key.to_string()))?;
        if e.generation != now || e.at.elapsed() > TTL {
            return None;
        }
        e.value.clone().downcast::<T>().ok()
    }

    /// Keeps `value`, read after [`ConfigCache::generation`] returned `generation`.
    pub fn put<T: Any + Send + Sync>(
        &self,
        tenant: &str,
        key: &str,
        generation: u64,
        value: Arc<T>,
    ) {
        if generation != self.generation() {
            return;
        }
        self.entries().insert(
            (tenant.to_string(), key.to_string()),
            Entry {
                generation,
                at: Instant::now(),
                value,
            },
        );
    }

    /// A configuration change committed: every entry is stale.
    pub(super) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_forgets_what_was_read_before_it() {
        let c = ConfigCache::default();
        let g = c.generation();
        c.put("t", "q", g, Arc::new(1u32));
        assert_eq!(c.get::<u32>("t", "q").as_deref(), Some(&1));
        assert!(c.get::<u32>("other", "q").is_none(), "per tenant");
        c.changed();
        assert!(c.get::<u32>("t", "q").is_none());
        // Read before the change, stored after it: never kept.
        c.put("t", "q", g, Arc::new(2u32));
        assert!(c.get::<u32>("t", "q").is_none());
    }
}

/// Values that stay true until access changes: a caller's identity, read from its API token on
/// every request. An entry holds the access generation ([`Store::access_generation`]) read
/// *before* the read that made it and is used only while the generation is still that one: a
/// commit here that changes access (a token revoked, a user disabled, renamed or deleted) or
/// another replica's announced change makes it stale at once. Entries are also dropped after
/// [`TTL`], so a change that reached the store some other way counts after at most that.
///
/// [`Store::access_generation`]: super::Store::access_generation
#[derive(Default)]
pub struct AccessCache {
    entries: Mutex<HashMap<String, Entry>>,
}

/// The most entries kept: beyond, the cache starts afresh (each is read again on its next use).
const ACCESS_ENTRIES: usize = 10_000;

impl AccessCache {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry of `key` if it was read at access generation `generation`, at most [`TTL`] ago.
    pub fn get<T: Any + Send + Sync>(&self, key: &str, generation: u64) -> Option<Arc<T>> {
        let entries = self.entries();
        let e = entries.get(key)?;
        if e.generation != generation || e.at.elapsed() > TTL {
            return None;
        }
        e.value.clone().downcast::<T>().ok()
    }

    /// Keeps `value`, read after the access generation was `generation`.
    pub fn put<T: Any + Send + Sync>(&self, key: &str, generation: u64, value: Arc<T>) {
        let mut entries = self.entries();
        if entries.len() >= ACCESS_ENTRIES {
            entries.clear();
        }
        entries.insert(
            key.to_string(),
            Entry {
                generation,
                at: Instant::now(),
                value,
            },
        );
    }

    /// Forgets `key` (its value is known to be stale).
    pub fn forget(&self, key: &str) {
        self.entries().remove(key);
    }
}
