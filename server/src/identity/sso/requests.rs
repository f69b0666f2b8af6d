//! Sign-ins in flight, for every protocol: the `sso_requests` table. A request is stored when
//! the browser is sent to the IdP and taken (deleted) when it comes back, so its key works
//! once; it is bound to the browser that started it by the digest of a cookie.

use sqlx::Row;

use crate::identity::secret;
use crate::store::{Store, WriteTx};

/// How long a sign-in may take between the redirect to the IdP and the callback.
pub const REQUEST_TTL_MS: i64 = 10 * 60_000;

/// A sign-in request to store under the digest of `key`.
pub struct NewRequest<'a> {
    pub key: &'a str,
    pub tenant_id: &'a str,
    pub provider_id: &'a str,
    /// Digest of the cookie that binds the sign-in to the browser.
    pub browser_hash: &'a str,
    /// OIDC: the nonce; SAML: the AuthnRequest ID the response must answer.
    pub nonce: &'a str,
    /// OIDC: the PKCE verifier.
    pub verifier: &'a str,
    pub next: &'a str,
    /// SAML: the login the ACS verified, waiting for the browser's hop (JSON).
    pub verified: Option<&'a str>,
    pub expires_at: i64,
}

/// Stores a request in `tx`, dropping the expired ones first.
pub async fn insert(tx: &mut WriteTx, r: NewRequest<'_>, now: i64) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM sso_requests WHERE expires_at < $1")
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    sqlx::query("INSERT INTO sso_requests (id_hash, tenant_id, provider_id, browser_hash, nonce, pkce_verifier, next, created_at, expires_at, verified) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
        .bind(secret::digest(r.key))
        .bind(r.tenant_id)
        .bind(r.provider_id)
        .bind(r.browser_hash)
        .bind(r.nonce)
        .bind(r.verifier)
        .bind(r.next)
        .bind(now)
        .bind(r.expires_at)
        .bind(r.verified)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// A sign-in in flight (any protocol), taken (deleted) when used: its key works once.
pub struct Pending {
    pub provider_id: String,
    pub tenant_id: String,
    /// Digest of the cookie that binds the sign-in to the browser that started it.
    pub browser_hash: String,
    /// OIDC: the nonce; SAML: the AuthnRequest ID the response must answer.
    pub nonce: String,
    pub verifier: String,
    pub next: String,
    /// SAML: the login the ACS verified, waiting for the browser's hop (JSON).
    pub verified: Option<String>,
}

const PENDING_SELECT: &str = "SELECT provider_id, tenant_id, browser_hash, nonce, pkce_verifier, next, expires_at, verified FROM sso_requests WHERE id_hash = $1";

/// Takes (deletes) the sign-in request stored under `key`; `None` when unknown, used or
/// expired. Callers check who may use it.
pub async fn take(store: &Store, key: &str) -> Result<Option<Pending>, sqlx::Error> {
    let mut tx = store.begin_write().await?;
    let row = sqlx::query(PENDING_SELECT)
        .bind(secret::digest(key))
        .fetch_optional(&mut *tx.tx)
        .await?;
    let Some(row) = row else { return Ok(None) };
    sqlx::query("DELETE FROM sso_requests WHERE id_hash = $1")
        .bind(secret::digest(key))
        .execute(&mut *tx.tx)
        .await?;
    let now = tx.now();
    tx.commit().await?;
    pending_from(&row, now)
}

/// Reads the sign-in request stored under `key` without taking it (the SAML ACS verifies the
/// response first, so a junk POST cannot cancel a sign-in); `None` when unknown or expired.
/// The caller takes it with [`take_in`] once the response is good.
pub async fn peek(store: &Store, key: &str) -> Result<Option<Pending>, sqlx::Error> {
    let row = sqlx::query(PENDING_SELECT)
        .bind(secret::digest(key))
        .fetch_optional(&store.pool)
        .await?;
    match row {
        Some(r) => pending_from(&r, store.now()),
        None => Ok(None),
    }
}

/// Deletes the sign-in request under `key` in `tx`; false when it is already gone (another
/// response took it first): single use even between concurrent posts.
pub async fn take_in(tx: &mut WriteTx, key: &str) -> Result<bool, sqlx::Error> {
    let n = sqlx::query("DELETE FROM sso_requests WHERE id_hash = $1 AND expires_at >= $2")
        .bind(secret::digest(key))
        .bind(tx.now())
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
    Ok(n == 1)
}

fn pending_from(row: &sqlx::any::AnyRow, now: i64) -> Result<Option<Pending>, sqlx::Error> {
    if row.try_get::<i64, _>("expires_at")? < now {
        return Ok(None);
    }
    Ok(Some(Pending {
        provider_id: row.try_get("provider_id")?,
        tenant_id: row.try_get("tenant_id")?,
        browser_hash: row.try_get("browser_hash")?,
        nonce: row.try_get("nonce")?,
        verifier: row.try_get("pkce_verifier")?,
        next: row.try_get("next")?,
        verified: row.try_get("verified")?,
    }))
}

/// Takes the sign-in request for `key` as [`take`] does, and only for the browser that
/// started it (the binding cookie matches).
pub async fn take_request(
    store: &Store,
    key: &str,
    browser_cookie: Option<&str>,
) -> Result<Option<Pending>, sqlx::Error> {
    Ok(take(store, key).await?.filter(|p| {
        browser_cookie.is_some_and(|c| {
            secret::constant_time_eq(secret::digest(c).as_bytes(), p.browser_hash.as_bytes())
        })
    }))
}
