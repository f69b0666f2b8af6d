//! Lanes: more than one chain per writer, so that transactions of one writer that commit
//! side by side do not wait for each other's chain head (PostgreSQL only; SQLite's one
//! writer serialises them anyway).
//!
//! - **Batch submits** (`POST /jobs/batch`) take whichever of the `api` chain's lanes
//!   ([`BATCH_LANES`]) no other transaction holds (`FOR UPDATE SKIP LOCKED`): four clients
//!   sending batches no longer queue behind one head from their first job's insert to their
//!   commit. Where every lane is held (or none exists yet) the batch waits for `api` itself,
//!   as before, and, holding it, opens the lanes that are missing ([`open_missing`]).
//! - **The scheduler's driver** commits the second half of a large cycle on
//!   [`Chain::Scheduler1`] beside the first on [`Chain::Scheduler`].
//!
//! Each lane is a chain like any other: gap-free, hash-linked, its opening recorded in the
//! tenant's `api` chain ([`super::CHAIN_OPEN`]), checked by [`super::verify`].
//!
//! No deadlock: a transaction that holds a lane waits for nothing (`SKIP LOCKED` never waits,
//! and a lane in use is already open), and one that waits for `api` holds no lane.

use super::{bind_head, head_lock_sql, open_chain, Chain, HeadLocked, BATCH_LANES, GENESIS};
use crate::store::WriteTx;

/// A statement that locks and reads one of the tenant's [`BATCH_LANES`] that no other
/// transaction holds (`chain, seq, hash`; no row when all are held or none is open yet). Its
/// one parameter, the tenant, is numbered `first`. PostgreSQL allows it as the last step of
/// another write (`WITH w AS (…) <this>`), as [`head_lock_sql`].
pub fn free_lane_sql(first: usize) -> String {
    let lanes = BATCH_LANES
        .iter()
        .map(|c| format!("'{}'", c.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT chain, seq, hash FROM audit_heads WHERE tenant_id = ${first} AND chain IN ({lanes})
         ORDER BY chain LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
}

/// The head a [`free_lane_sql`] statement returned.
pub fn lane_locked(tenant_id: &str, row: sqlx::any::AnyRow) -> Result<HeadLocked, sqlx::Error> {
    use sqlx::Row;
    let label: String = row.try_get("chain")?;
    let chain = Chain::parse(&label)
        .filter(|c| BATCH_LANES.contains(c))
        .ok_or_else(|| sqlx::Error::Protocol(format!("not a batch lane: {label}")))?;
    Ok(HeadLocked {
        tenant_id: tenant_id.to_string(),
        chain,
        row,
    })
}

/// Where no lane was free: waits for the tenant's `api` head and, holding it, opens the lanes
/// that do not exist yet (each opening recorded in `api`). Returns `api`'s head as it is
/// after those openings, for the batch's own entries (read once where every lane existed:
/// all were held).
pub async fn open_missing(
    tx: &mut WriteTx,
    now: i64,
    tenant_id: &str,
) -> Result<HeadLocked, sqlx::Error> {
    // `api` first: a transaction creating lanes never holds one while it waits.
    let lock = head_lock_sql(1);
    let lock_api = || bind_head(sqlx::query(&lock), tenant_id, Chain::Api);
    let mut row = lock_api().fetch_one(&mut *tx.tx).await?;
    let values = BATCH_LANES
        .iter()
        .enumerate()
        .map(|(i, _)| format!("($1, ${}, 0, $2)", i + 3))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "INSERT INTO audit_heads (tenant_id, chain, seq, hash) VALUES {values}
         ON CONFLICT (tenant_id, chain) DO NOTHING RETURNING chain"
    );
    let mut q = sqlx::query(&sql).bind(tenant_id).bind(GENESIS);
    for c in BATCH_LANES {
        q = q.bind(c.as_str());
    }
    let created: Vec<String> = {
        use sqlx::Row;
        q.fetch_all(&mut *tx.tx)
            .await?
            .iter()
            .map(|r| r.try_get::<String, _>("chain"))
            .collect::<Result<_, _>>()?
    };
    for c in BATCH_LANES {
        if created.iter().any(|l| l == c.as_str()) {
            open_chain(tx, now, tenant_id, c).await?;
        }
    }
    // The openings moved `api` on: its head is read again (already held, so no wait).
    if !created.is_empty() {
        row = lock_api().fetch_one(&mut *tx.tx).await?;
    }
    Ok(HeadLocked {
        tenant_id: tenant_id.to_string(),
        chain: Chain::Api,
        row,
    })
}
