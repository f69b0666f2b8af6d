//! Configuration read on every submit (a queue, its profile, its pools' shapes) remembered
//! between requests, and forgotten by every commit that changes configuration.
//!
//! A transaction that changes queues, profiles, pools, grants or groups says so
//! ([`WriteTx::config_changed`](super::WriteTx::config_changed)); its commit moves the
//! generation on and empties the cache. An entry is stored with the generation read *before*
//! the reads that made it, so a change committed while they ran leaves it stale at once. Other
//! processes' changes (several replicas on one PostgreSQL) reach this one's cache after at most
//! [`TTL`].
//!
//! The same for callers known by their API tokens ([`AccessCache`]), against the store's
//! access generation instead.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long an entry is trusted without a local change: the bound on seeing another process's.
pub const TTL: Duration = Duration::from_secs(2);

/// Values of any type by key, each with the generation read before the reads that made it:
/// what both caches below keep.
struct Entries<K> {
    map: Mutex<HashMap<K, Entry>>,
}

impl<K> Default for Entries<K> {
    fn default() -> Self {
        Entries {
            map: Mutex::new(HashMap::new()),
        }
    }
}

struct Entry {
    generation: u64,
    at: Instant,
    value: Arc<dyn Any + Send + Sync>,
}

impl<K: std::hash::Hash + Eq> Entries<K> {
    fn map(&self) -> MutexGuard<'_, HashMap<K, Entry>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry of `key` if it was read at `generation`, at most [`TTL`] ago.
    fn get<T: Any + Send + Sync>(&self, key: &K, generation: u64) -> Option<Arc<T>> {
        let map = self.map();
        let e = map.get(key)?;
        if e.generation != generation || e.at.elapsed() > TTL {
            return None;
        }
        e.value.clone().downcast::<T>().ok()
    }

    fn put(&self, key: K, generation: u64, value: Arc<dyn Any + Send + Sync>) {
        self.map().insert(
            key,
            Entry {
                generation,
                at: Instant::now(),
                value,
            },
        );
    }
}

/// Entries by (tenant, key), each any type (the owner of the reads decides what it keeps).
#[derive(Default)]
pub struct ConfigCache {
    generation: AtomicU64,
    entries: Entries<(String, String)>,
}

impl ConfigCache {
    /// The generation to pass to [`ConfigCache::put`]: read it before the reads.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The entry of `tenant` and `key`, if no change was committed since it was read.
    pub fn get<T: Any + Send + Sync>(&self, tenant: &str, key: &str) -> Option<Arc<T>> {
        self.entries
            .get(&(tenant.to_string(), key.to_string()), self.generation())
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
        self.entries
            .put((tenant.to_string(), key.to_string()), generation, value);
    }

    /// A configuration change committed: every entry is stale.
    pub(super) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.map().clear();
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
    entries: Entries<String>,
}

/// The most entries kept: beyond, the cache starts afresh (each is read again on its next use).
const ACCESS_ENTRIES: usize = 10_000;

impl AccessCache {
    /// The entry of `key` if it was read at access generation `generation`, at most [`TTL`] ago.
    pub fn get<T: Any + Send + Sync>(&self, key: &str, generation: u64) -> Option<Arc<T>> {
        self.entries.get(&key.to_string(), generation)
    }

    /// Keeps `value`, read after the access generation was `generation`.
    pub fn put<T: Any + Send + Sync>(&self, key: &str, generation: u64, value: Arc<T>) {
        {
            let mut map = self.entries.map();
            if map.len() >= ACCESS_ENTRIES {
                map.clear();
            }
        }
        self.entries.put(key.to_string(), generation, value);
    }

    /// Forgets `key` (its value is known to be stale).
    pub fn forget(&self, key: &str) {
        self.entries.map().remove(key);
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

    #[test]
    fn an_access_change_makes_what_was_read_before_it_stale() {
        let c = AccessCache::default();
        c.put("digest", 7, Arc::new(1u32));
        assert_eq!(c.get::<u32>("digest", 7).as_deref(), Some(&1));
        assert!(c.get::<u32>("other", 7).is_none());
        // The store's access generation moved on: not used again.
        assert!(c.get::<u32>("digest", 8).is_none());
        c.forget("digest");
        assert!(c.get::<u32>("digest", 7).is_none());
    }
}
