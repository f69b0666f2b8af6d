//! Idempotent submits (`Idempotency-Key`, as Stripe and the IETF draft define it): the first
//! request with a key stores which jobs it created, in the same transaction as the jobs; a
//! retry with the same key and the same body gets those jobs back instead of new ones, and one
//! with another body is refused. Keys are per user and kept for 24 hours. Concurrent requests
//! with one key serialize on its row: the second waits for the first to commit, then replays.

use crate::http::error::AppError;
use crate::store::WriteTx;

/// How long a key is remembered.
pub const KEEP_MS: i64 = 24 * 3_600_000;

/// The header that carries the key.
pub const HEADER: &str = "idempotency-key";

/// A checked key with the digest of the request it came with.
#[derive(Clone, Debug)]
pub struct IdemKey {
    pub key: String,
    pub digest: String,
}

impl IdemKey {
    /// 1 to 255 visible ASCII characters (a UUID is typical); anything else is a 422 naming
    /// the header.
    pub fn new(key: &str, request: &impl serde::Serialize) -> Result<IdemKey, AppError> {
        let ok = !key.is_empty() && key.len() <= 255 && key.bytes().all(|b| b.is_ascii_graphic());
        if !ok {
            return Err(AppError::field(
                "Idempotency-Key",
                "use 1 to 255 visible ASCII characters",
            ));
        }
        let body = serde_json::to_string(request).map_err(|_| AppError::Internal)?;
        Ok(IdemKey {
            key: key.to_string(),
            digest: crate::identity::secret::digest(&body),
        })
    }
}

/// What the store knows of a key.
pub enum Claim {
    /// First use: the caller creates its jobs and [`remember`]s them.
    New,
    /// Used before with the same request: these jobs answer it.
    Replay(Vec<String>),
    /// Used before with another request (refused, see [`clash`]).
    Clash,
}

/// The answer to a key used before with another request.
pub fn clash() -> AppError {
    AppError::field(
        "Idempotency-Key",
        "was already used with a different request",
    )
}

/// Claims `key` for this user in `tx`. A key used before with another request is a 422.
pub async fn claim(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    key: &IdemKey,
    now: i64,
) -> Result<Claim, crate::http::error::ApiError> {
    forget_expired(tx, now).await?;
    match claim_as(tx, tenant_id, user_id, key, now, &[]).await? {
        Claim::Clash => Err(clash().into()),
        c => Ok(c),
    }
}

/// Deletes the keys older than [`KEEP_MS`].
pub async fn forget_expired(tx: &mut WriteTx, now: i64) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
        .bind(now - KEEP_MS)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// [`claim`] that, on first use, already stores the jobs the caller is about to create (so a
/// later request with the key in the same transaction replays them); the caller deletes the
/// claim with [`release`] if it then creates nothing. Expired keys are left to
/// [`forget_expired`].
pub async fn claim_as(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    key: &IdemKey,
    now: i64,
    job_ids: &[&str],
) -> Result<Claim, sqlx::Error> {
    let ids = serde_json::to_string(job_ids).unwrap_or_else(|_| "[]".into());
    let fresh = sqlx::query(
        "INSERT INTO idempotency_keys (tenant_id, user_id, idem_key, request_digest, job_ids, created_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
    )
    .bind(tenant_id)
    .bind(user_id)
    .bind(&key.key)
    .bind(&key.digest)
    .bind(ids)
    .bind(now)
    .execute(&mut *tx.tx)
    .await?
    .rows_affected();
    if fresh == 1 {
        return Ok(Claim::New);
    }
    let (digest, ids): (String, String) = sqlx::query_as(
        "SELECT request_digest, job_ids FROM idempotency_keys WHERE tenant_id = $1 AND user_id = $2 AND idem_key = $3",
    )
    .bind(tenant_id)
    .bind(user_id)
    .bind(&key.key)
    .fetch_one(&mut *tx.tx)
    .await?;
    if digest != key.digest {
        return Ok(Claim::Clash);
    }
    let ids: Vec<String> =
        serde_json::from_str(&ids).map_err(|e| crate::store::corrupt("job_ids", e))?;
    Ok(Claim::Replay(ids))
}

/// Takes back a claim made in `tx` whose request created nothing (refused by a cap).
pub async fn release(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    key: &IdemKey,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DELETE FROM idempotency_keys WHERE tenant_id = $1 AND user_id = $2 AND idem_key = $3",
    )
    .bind(tenant_id)
    .bind(user_id)
    .bind(&key.key)
    .execute(&mut *tx.tx)
    .await?;
    Ok(())
}

/// Stores the jobs a claimed key created, in the transaction that created them.
pub async fn remember(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    key: &IdemKey,
    job_ids: &[&str],
) -> Result<(), sqlx::Error> {
    let ids = serde_json::to_string(job_ids).unwrap_or_else(|_| "[]".into());
    sqlx::query(
        "UPDATE idempotency_keys SET job_ids = $1 WHERE tenant_id = $2 AND user_id = $3 AND idem_key = $4",
    )
    .bind(ids)
    .bind(tenant_id)
    .bind(user_id)
    .bind(&key.key)
    .execute(&mut *tx.tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_and_bodies_digested() {
        assert!(IdemKey::new("", &1).is_err());
        assert!(IdemKey::new("has space", &1).is_err());
        assert!(IdemKey::new(&"k".repeat(256), &1).is_err());
        let a = IdemKey::new("3f2a-1", &serde_json::json!({"name": "a"})).unwrap();
        let b = IdemKey::new("3f2a-1", &serde_json::json!({"name": "b"})).unwrap();
        assert_ne!(a.digest, b.digest);
    }
}
