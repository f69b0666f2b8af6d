//! Sign-in (password -> session or API token), sessions, API tokens, and resolving the caller
//! of a request from its cookie or bearer token.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use app::access::Action;
use app::model::*;

use super::{password, secret};
use crate::audit::{self, Actor, Record};
use crate::http::error::{ApiResult, AppError, Validator};
use crate::http::require;
use crate::http::text::{clean_text, UNCLEAN};
use crate::store::{new_id, Store, WriteTx};

const DAY_MS: i64 = 86_400_000;

/// The caller's identity columns; the sign-in paths add what they need in the same query.
const ME_COLUMNS: &str =
    "u.id AS user_id, u.username, u.display_name, u.email, u.is_tenant_admin, u.is_platform_admin,
    t.id AS tenant_id, t.slug AS tenant_slug, t.name AS tenant_name";
const ME_FROM: &str = "users u JOIN tenants t ON t.id = u.tenant_id";

fn me_from_row(r: &AnyRow) -> Result<Me, sqlx::Error> {
    Ok(Me {
        user_id: r.try_get("user_id")?,
        username: r.try_get("username")?,
        display_name: r.try_get("display_name")?,
        email: r.try_get("email")?,
        tenant_id: r.try_get("tenant_id")?,
        tenant_slug: r.try_get("tenant_slug")?,
        tenant_name: r.try_get("tenant_name")?,
        is_platform_admin: r.try_get::<i64, _>("is_platform_admin")? != 0,
        is_tenant_admin: r.try_get::<i64, _>("is_tenant_admin")? != 0,
    })
}

/// A token's caller as its last lookup found it, kept in the store's access cache
/// ([`crate::store::config_cache::AccessCache`]) until access changes.
struct KnownToken {
    principal: Principal,
    token_id: String,
    expires_at: i64,
    /// When its use was last recorded, or `i64::MIN`: moved on by whichever request records it.
    last_used_at: AtomicI64,
}

/// Who is calling, from a bearer token. `None` for unknown, expired or revoked tokens and for
/// disabled users: checked on every request, so revocation takes effect at once. What a lookup
/// found is kept until access changes (a token revoked or deleted, a user disabled, renamed or
/// deleted: each such commit moves the store's access generation on, and another replica's
/// reaches this one through the change feed), and the token's expiry is checked on every use.
pub async fn principal_from_token(
    store: &Store,
    token: &str,
    now: i64,
) -> Result<Option<Principal>, sqlx::Error> {
    let digest = secret::digest(token);
    // Read before the lookup: a change committed while it runs leaves its entry stale.
    let generation = store.access_generation();
    if let Some(k) = store.access.get::<KnownToken>(&digest, generation) {
        if k.expires_at > now {
            record_use(store, &k.token_id, &k.last_used_at, now).await?;
            return Ok(Some(k.principal.clone()));
        }
        store.access.forget(&digest);
    }
    let row = sqlx::query(&format!(
        "SELECT {ME_COLUMNS}, k.id AS token_id, k.last_used_at, k.expires_at FROM {ME_FROM} JOIN api_tokens k ON k.user_id = u.id AND k.tenant_id = u.tenant_id
         WHERE k.token_hash = $1 AND k.revoked_at IS NULL AND k.expires_at > $2 AND u.disabled = 0"
    ))
    .bind(&digest)
    .bind(now)
    .fetch_optional(&store.pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let me = me_from_row(&row)?;
    let token_id: String = row.try_get("token_id")?;
    let last_used: Option<i64> = row.try_get("last_used_at")?;
    let principal = Principal {
        me,
        auth: Auth::Token {
            token_id: token_id.clone(),
        },
    };
    let known = Arc::new(KnownToken {
        principal: principal.clone(),
        token_id,
        expires_at: row.try_get("expires_at")?,
        last_used_at: AtomicI64::new(last_used.unwrap_or(i64::MIN)),
    });
    record_use(store, &known.token_id, &known.last_used_at, now).await?;
    store.access.put(&digest, generation, known);
    Ok(Some(principal))
}

/// Records a token's use at most once a minute, so reads stay reads (on SQLite even an UPDATE
/// that changes nothing waits for the write lock): only the request that moves `last_used_at`
/// on writes.
async fn record_use(
    store: &Store,
    token_id: &str,
    last_used_at: &AtomicI64,
    now: i64,
) -> Result<(), sqlx::Error> {
    let last = last_used_at.load(Ordering::Relaxed);
    if last >= now - 60_000
        || last_used_at
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return Ok(());
    }
    sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)")
        .bind(now)
        .bind(token_id)
        .bind(now - 60_000)
        .execute(&store.pool)
        .await?;
    Ok(())
}

/// Who is calling, from the session cookie's value.
pub async fn principal_from_session(
    store: &Store,
    session: &str,
    now: i64,
) -> Result<Option<Principal>, sqlx::Error> {
    let id_hash = secret::digest(session);
    let row = sqlx::query(&format!(
        "SELECT {ME_COLUMNS}, s.csrf_token FROM {ME_FROM} JOIN sessions s ON s.user_id = u.id AND s.tenant_id = u.tenant_id
         WHERE s.id_hash = $1 AND s.expires_at > $2 AND u.disabled = 0"
    ))
    .bind(&id_hash)
    .bind(now)
    .fetch_optional(&store.pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let me = me_from_row(&row)?;
    let csrf: String = row.try_get("csrf_token")?;
    Ok(Some(Principal {
        me,
        auth: Auth::Session {
            session_id: id_hash,
            csrf,
        },
    }))
}

/// Verifies against `hash` (or the dummy hash, for an equal cost, when there is none) on the
/// blocking pool: argon2 takes tens of milliseconds of CPU that must not stall request workers.
async fn verify_off_runtime(password_text: &str, hash: Option<String>) -> bool {
    let pw = password_text.to_string();
    tokio::task::spawn_blocking(move || match hash {
        Some(h) => password::verify(&pw, &h),
        None => {
            password::verify(&pw, password::dummy_hash());
            false
        }
    })
    .await
    .unwrap_or(false)
}

/// The result of checking a password.
pub enum PasswordCheck {
    Ok(Me),
    /// Wrong tenant, user, password, disabled account or SSO-only account: one answer for all.
    Invalid {
        tenant_id: Option<String>,
    },
}

pub async fn check_password(
    store: &Store,
    tenant_slug: &str,
    username: &str,
    password_text: &str,
) -> Result<PasswordCheck, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {ME_COLUMNS}, u.password_hash, t.password_login FROM {ME_FROM} WHERE t.slug = $1 AND u.username = $2 AND u.disabled = 0"
    ))
    .bind(tenant_slug.trim().to_lowercase())
    .bind(username.trim().to_lowercase())
    .fetch_optional(&store.pool)
    .await?;
    let Some(row) = row else {
        verify_off_runtime(password_text, None).await;
        let tenant_id: Option<String> =
            sqlx::query_scalar("SELECT id FROM tenants WHERE slug = $1")
                .bind(tenant_slug.trim().to_lowercase())
                .fetch_optional(&store.pool)
                .await?;
        return Ok(PasswordCheck::Invalid { tenant_id });
    };
    let me = me_from_row(&row)?;
    let mut hash: Option<String> = row.try_get("password_hash")?;
    // A tenant that turned password sign-in off still lets platform admins in (break-glass).
    if row.try_get::<i64, _>("password_login")? == 0 && !me.is_platform_admin {
        hash = None;
    }
    let ok = verify_off_runtime(password_text, hash).await;
    Ok(if ok {
        PasswordCheck::Ok(me)
    } else {
        PasswordCheck::Invalid {
            tenant_id: Some(me.tenant_id),
        }
    })
}

/// Audits a failed sign-in in the tenant's log (when the tenant exists).
pub async fn audit_failed_login(
    store: &Store,
    tenant_id: &str,
    username: &str,
    meta: &RequestMeta,
    reason: &str,
) -> ApiResult<()> {
    let now = store.now();
    let mut tx = store.begin_write().await?;
    audit::append(
        &mut tx,
        now,
        Record {
            tenant_id,
            actor: &Actor::system(username),
            action: "auth.login_failed",
            target_kind: "user",
            target_id: username,
            summary: json!({"reason": reason}),
            meta,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Stores a new session inside the caller's transaction: returns (cookie value, csrf token).
/// Expired sessions of anyone are swept here rather than by a timer.
pub async fn insert_session(
    tx: &mut WriteTx,
    me: &Me,
    now: i64,
    ttl_ms: i64,
) -> Result<(String, String), sqlx::Error> {
    let session = secret::random();
    let csrf = secret::random();
    sqlx::query("INSERT INTO sessions (id_hash, tenant_id, user_id, csrf_token, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(secret::digest(&session))
        .bind(&me.tenant_id)
        .bind(&me.user_id)
        .bind(&csrf)
        .bind(now)
        .bind(now + ttl_ms)
        .execute(&mut *tx.tx)
        .await?;
    sqlx::query("DELETE FROM sessions WHERE expires_at < $1")
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    Ok((session, csrf))
}

/// A new browser session: returns (cookie value, csrf token).
pub async fn create_session(
    store: &Store,
    me: &Me,
    meta: &RequestMeta,
    ttl_ms: i64,
) -> ApiResult<(String, String)> {
    let now = store.now();
    let mut tx = store.begin_write().await?;
    let (session, csrf) = insert_session(&mut tx, me, now, ttl_ms).await?;
    audit::append(
        &mut tx,
        now,
        Record {
            tenant_id: &me.tenant_id,
            actor: &Actor {
                id: Some(me.user_id.clone()),
                name: me.username.clone(),
            },
            action: "auth.login",
            target_kind: "user",
            target_id: &me.user_id,
            summary: json!({"method": "password", "via": "web"}),
            meta,
        },
    )
    .await?;
    tx.commit().await?;
    Ok((session, csrf))
}

pub async fn end_session(store: &Store, p: &Principal, meta: &RequestMeta) -> ApiResult<()> {
    let Auth::Session { session_id, .. } = &p.auth else {
        return Ok(());
    };
    let now = store.now();
    let mut tx = store.begin_write().await?;
    sqlx::query("DELETE FROM sessions WHERE id_hash = $1")
        .bind(session_id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "auth.logout",
        "user",
        p.user_id(),
        json!({"via": "web"}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

// ---- API tokens ---------------------------------------------------------------------------

const TOKEN_COLUMNS: &str =
    "id, user_id, name, prefix, created_at, expires_at, revoked_at, last_used_at";

fn token_from_row(r: &AnyRow) -> Result<ApiToken, sqlx::Error> {
    Ok(ApiToken {
        id: r.try_get("id")?,
        user_id: r.try_get("user_id")?,
        name: r.try_get("name")?,
        prefix: r.try_get("prefix")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        revoked_at: r.try_get("revoked_at")?,
        last_used_at: r.try_get("last_used_at")?,
    })
}

/// Issues a token for `me` (used by `POST /tokens` and by `POST /auth/login`).
pub async fn issue_token(
    store: &Store,
    me: &Me,
    meta: &RequestMeta,
    name: &str,
    days: Option<i64>,
    default_days: i64,
    action: &str,
) -> ApiResult<NewToken> {
    let name = name.trim().to_string();
    let days = days.unwrap_or(default_days);
    let mut v = Validator::default();
    v.check(
        !name.is_empty() && name.chars().count() <= 64,
        "name",
        "must be 1 to 64 characters",
    );
    v.check(clean_text(&name), "name", UNCLEAN);
    v.check(
        (1..=365).contains(&days),
        "expires_in_days",
        "must be between 1 and 365",
    );
    v.finish()?;
    let now = store.now();
    let token = secret::new_api_token();
    let info = ApiToken {
        id: new_id(),
        user_id: me.user_id.clone(),
        name,
        prefix: token.chars().take(10).collect(),
        created_at: now,
        expires_at: now + days * DAY_MS,
        revoked_at: None,
        last_used_at: None,
    };
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO api_tokens (id, tenant_id, user_id, name, prefix, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
        .bind(&info.id)
        .bind(&me.tenant_id)
        .bind(&me.user_id)
        .bind(&info.name)
        .bind(&info.prefix)
        .bind(secret::digest(&token))
        .bind(now)
        .bind(info.expires_at)
        .execute(&mut *tx.tx)
        .await?;
    audit::append(&mut tx, now, Record {
        tenant_id: &me.tenant_id,
        actor: &Actor { id: Some(me.user_id.clone()), name: me.username.clone() },
        action,
        target_kind: "token",
        target_id: &info.id,
        summary: json!({"name": info.name, "prefix": info.prefix, "expires_at": info.expires_at}),
        meta,
    })
    .await?;
    tx.commit().await?;
    Ok(NewToken { token, info })
}

pub async fn create_token(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateToken,
) -> ApiResult<NewToken> {
    require(p, Action::ManageOwnTokens)?;
    issue_token(
        store,
        &p.me,
        meta,
        &input.name,
        input.expires_in_days,
        30,
        "token.create",
    )
    .await
}

/// The caller's tokens; tenant admins see every token of the tenant.
pub async fn list_tokens(store: &Store, p: &Principal) -> ApiResult<Vec<ApiToken>> {
    require(p, Action::ManageOwnTokens)?;
    let all = app::access::allowed(&p.me, Action::ManageTenantTokens);
    let rows = sqlx::query(&format!(
        "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE tenant_id = $1 AND ($2 = 1 OR user_id = $3) ORDER BY id"
    ))
    .bind(p.tenant_id())
    .bind(i64::from(all))
    .bind(p.user_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows
        .iter()
        .map(token_from_row)
        .collect::<Result<Vec<_>, _>>()?)
}

pub async fn revoke_token(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManageOwnTokens)?;
    let all = app::access::allowed(&p.me, Action::ManageTenantTokens);
    let row = sqlx::query(&format!("SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE tenant_id = $1 AND id = $2 AND ($3 = 1 OR user_id = $4)"))
        .bind(p.tenant_id())
        .bind(id)
        .bind(i64::from(all))
        .bind(p.user_id())
        .fetch_optional(&store.pool)
        .await?
        .ok_or(AppError::NotFound)?;
    let token = token_from_row(&row)?;
    if token.revoked_at.is_some() {
        return Ok(());
    }
    let now = store.now();
    let mut tx = store.begin_write().await?;
    sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE tenant_id = $2 AND id = $3")
        .bind(now)
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    // Its caller is no longer known (the access cache, `principal_from_token`).
    tx.access_changed();
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "token.revoke",
        "token",
        id,
        json!({"name": token.name, "prefix": token.prefix, "owner": token.user_id}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Ends every browser session of a user, in the caller's transaction.
pub async fn end_sessions_of(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query("DELETE FROM sessions WHERE tenant_id = $1 AND user_id = $2")
            .bind(tenant_id)
            .bind(user_id)
            .execute(&mut *tx.tx)
            .await?
            .rows_affected(),
    )
}

/// Marks every still-valid API token of a user revoked (the token list shows why it stopped
/// working), in the caller's transaction. Returns how many.
pub async fn revoke_tokens_of(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    now: i64,
) -> Result<u64, sqlx::Error> {
    let n = sqlx::query(
        "UPDATE api_tokens SET revoked_at = $1 WHERE tenant_id = $2 AND user_id = $3 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(tenant_id)
    .bind(user_id)
    .execute(&mut *tx.tx)
    .await?
    .rows_affected();
    if n > 0 {
        tx.access_changed();
    }
    Ok(n)
}

/// Deletes every session and API token of a user (the user is being deleted).
pub async fn delete_credentials_of(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
) -> Result<(), sqlx::Error> {
    end_sessions_of(tx, tenant_id, user_id).await?;
    sqlx::query("DELETE FROM api_tokens WHERE tenant_id = $1 AND user_id = $2")
        .bind(tenant_id)
        .bind(user_id)
        .execute(&mut *tx.tx)
        .await?;
    tx.access_changed();
    Ok(())
}
