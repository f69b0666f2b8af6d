//! The change feed across replicas (PostgreSQL): a commit that changes who may call what says
//! so with `NOTIFY` on the schema's channel inside its transaction (delivered only if it
//! commits), and every process sharing the schema listens and moves its access generation,
//! so each replica's gateway snapshot is renewed before its next request. On SQLite there is
//! one process and nothing to listen to.

use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlx::postgres::PgListener;

use super::{Dialect, Store};

/// The channel of the store's schema (several deployments may share a database).
pub(super) async fn channel(store: &Store) -> Result<String, sqlx::Error> {
    let schema: String = sqlx::query_scalar("SELECT current_schema()::text")
        .fetch_one(&store.pool)
        .await?;
    Ok(channel_of(&schema))
}

/// PostgreSQL refuses a channel name longer than an identifier (63 bytes).
const MAX_CHANNEL: usize = 63;

/// `switchyard_access:<schema>`, or, where that is too long for PostgreSQL (a schema name of
/// more than 45 bytes), the same prefix with the first 128 bits of the schema name's SHA-256:
/// every process on the schema computes the same name.
fn channel_of(schema: &str) -> String {
    let plain = format!("switchyard_access:{schema}");
    if plain.len() <= MAX_CHANNEL {
        return plain;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(schema.as_bytes());
    format!("switchyard_access:{}", hex::encode(&digest[..16]))
}

impl Store {
    /// Follows the other replicas' access changes (PostgreSQL; `None` on SQLite): each
    /// notification, and each reconnection (one may have been missed), moves this process's
    /// access generation.
    pub fn follow_replicas(&self) -> Option<tokio::task::JoinHandle<()>> {
        if self.dialect != Dialect::Postgres {
            return None;
        }
        let store = self.clone();
        Some(tokio::spawn(async move {
            let mut failures = 0u32;
            loop {
                match listen(&store).await {
                    Ok(()) => failures = 0,
                    Err(e) => {
                        failures = failures.saturating_add(1);
                        tracing::warn!(error = %e, failures, "store: the replicas' change feed dropped; reconnecting");
                    }
                }
                store.access_generation.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100 << failures.min(6))).await;
            }
        }))
    }
}

/// Listens until the connection fails.
async fn listen(store: &Store) -> Result<(), sqlx::Error> {
    let channel = channel(store).await?;
    let mut l = PgListener::connect(&store.url).await?;
    l.listen(&channel).await?;
    // Changes made while not listening are not known: renew once now.
    store.access_generation.fetch_add(1, Ordering::SeqCst);
    loop {
        l.recv().await?;
        store.access_generation.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::{channel_of, MAX_CHANNEL};

    #[test]
    fn every_schema_gets_a_channel_postgresql_takes() {
        assert_eq!(channel_of("public"), "switchyard_access:public");
        let at_limit = "s".repeat(45);
        assert_eq!(
            channel_of(&at_limit),
            format!("switchyard_access:{at_limit}")
        );
        // Longer names (PostgreSQL allows 63-byte schema names) get a digest, and two of them
        // that differ only at the end still get channels of their own.
        let a = channel_of(&format!("{}a", "s".repeat(62)));
        let b = channel_of(&format!("{}b", "s".repeat(62)));
        assert!(
            a.len() <= MAX_CHANNEL && b.len() <= MAX_CHANNEL,
            "{a} / {b}"
        );
        assert_ne!(a, b);
        assert_eq!(a, channel_of(&format!("{}a", "s".repeat(62))));
    }
}
