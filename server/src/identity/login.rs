//! Password sign-in, the one path for the sign-in form and `POST /auth/login`: names checked,
//! the attempt throttled (reserved before the password is checked), failures audited.

use std::sync::Mutex;

use sqlx::Row;

use app::model::{Me, RequestMeta};

use super::throttle::{self, Throttle};
use super::tokens::{self, PasswordCheck};
use crate::http::error::{ApiError, ApiResult, AppError, Validator};
use crate::store::Store;

/// The longest organization (tenant slug) and username a sign-in takes. Longer ones are refused
/// before anything is looked up, throttled or written to the audit log.
pub const MAX_TENANT_CHARS: usize = 64;
pub const MAX_USERNAME_CHARS: usize = 256;

/// 422 at the field when the organization or username is too long to be anyone's.
pub fn check_sign_in_names(tenant: Option<&str>, username: &str) -> Result<(), AppError> {
    let mut v = Validator::default();
    if let Some(t) = tenant {
        v.check(
            t.trim().chars().count() <= MAX_TENANT_CHARS,
            "tenant",
            "must be at most 64 characters",
        );
    }
    v.check(
        username.trim().chars().count() <= MAX_USERNAME_CHARS,
        "username",
        "must be at most 256 characters",
    );
    v.finish()
}

/// The throttle's account key for a password sign-in (see [`throttle::account_key`]): looks up
/// whether the account exists, its password hash and whether it is a platform admin.
async fn account_key(
    store: &Store,
    tenant: &str,
    username: &str,
    source: &str,
) -> Result<String, sqlx::Error> {
    let row = sqlx::query(
        "SELECT u.password_hash, u.is_platform_admin FROM users u JOIN tenants t ON t.id = u.tenant_id
         WHERE t.slug = $1 AND u.username = $2",
    )
    .bind(tenant)
    .bind(username)
    .fetch_optional(&store.pool)
    .await?;
    let (hash, platform_admin) = match row {
        Some(r) => (
            r.try_get::<Option<String>, _>("password_hash")?,
            r.try_get::<i64, _>("is_platform_admin")? != 0,
        ),
        None => (None, false),
    };
    Ok(throttle::account_key(
        tenant,
        username,
        hash.as_deref(),
        platform_admin,
        source,
    ))
}

/// Checks a password with throttling and audit of failures; the one sign-in path for the form
/// and the API.
///
/// The attempt is reserved in the throttle (counted as a failure) before the password is
/// checked and given back on success, so parallel guesses cannot outrun the count.
pub async fn password_login(
    store: &Store,
    throttle: &Mutex<Throttle>,
    meta: &RequestMeta,
    tenant: &str,
    username: &str,
    password: &str,
) -> ApiResult<Me> {
    check_sign_in_names(Some(tenant), username)?;
    let tenant_slug = tenant.trim().to_lowercase();
    let user = username.trim().to_lowercase();
    let account = account_key(store, &tenant_slug, &user, &meta.source_ip).await?;
    let source = meta.source_ip.as_str();
    let now = store.now();
    throttle
        .lock()
        .map_err(|_| ApiError(AppError::Internal))?
        .reserve(&account, source, now)
        .map_err(|secs| AppError::TooManyRequests {
            retry_after_secs: secs,
        })?;
    let checked = tokens::check_password(store, tenant, username, password).await;
    let give_back = |success: bool| {
        if let Ok(mut t) = throttle.lock() {
            if success {
                t.success(&account, source, now);
            } else {
                t.release(&account, source, now);
            }
        }
    };
    match checked {
        Err(e) => {
            // Not a wrong password: the attempt does not count.
            give_back(false);
            Err(e.into())
        }
        Ok(PasswordCheck::Ok(me)) => {
            give_back(true);
            Ok(me)
        }
        Ok(PasswordCheck::Invalid { tenant_id }) => {
            if let Some(tid) = tenant_id {
                tokens::audit_failed_login(store, &tid, &user, meta, "invalid credentials").await?;
            }
            Err(AppError::Unauthorized.into())
        }
    }
}
