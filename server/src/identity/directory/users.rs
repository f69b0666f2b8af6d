//! Users: the `users` table. Disabling or deleting a user ends their access at once.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::*;
use crate::audit::{self, Actor, Record};
use crate::http::error::{unique_violation_as, ApiResult, AppError, Validator};
use crate::http::require;
use crate::http::text::{clean_text, UNCLEAN};
use crate::identity::{password, tokens};
use crate::store::{flag, new_id, Store, WriteTx};

pub(crate) const USER_COLUMNS: &str = "id, tenant_id, username, display_name, email, password_hash, is_tenant_admin, is_platform_admin, disabled, created_at";

pub(crate) fn user_from_row(r: &AnyRow) -> Result<User, sqlx::Error> {
    let hash: Option<String> = r.try_get("password_hash")?;
    Ok(User {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        username: r.try_get("username")?,
        display_name: r.try_get("display_name")?,
        email: r.try_get("email")?,
        is_tenant_admin: r.try_get::<i64, _>("is_tenant_admin")? != 0,
        is_platform_admin: r.try_get::<i64, _>("is_platform_admin")? != 0,
        disabled: r.try_get::<i64, _>("disabled")? != 0,
        has_password: hash.is_some(),
        created_at: r.try_get("created_at")?,
    })
}

pub async fn list_users(store: &Store, p: &Principal, q: &ListParams) -> ApiResult<Page<User>> {
    require(p, Action::ViewDirectory)?;
    let limit = q.limit()?;
    let rows = sqlx::query(&format!(
        "SELECT {USER_COLUMNS} FROM users WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3"
    ))
    .bind(p.tenant_id())
    .bind(q.cursor.clone().unwrap_or_default())
    .bind(limit + 1)
    .fetch_all(&store.pool)
    .await?;
    let users = rows
        .iter()
        .map(user_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(paginate(users, limit, |u| u.id.clone()))
}

pub async fn get_user(store: &Store, p: &Principal, id: &str) -> ApiResult<User> {
    require(p, Action::ViewDirectory)?;
    let row = sqlx::query(&format!(
        "SELECT {USER_COLUMNS} FROM users WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(user_from_row(&row)?)
}

fn validate_password(v: &mut Validator, pw: &Option<String>) {
    if let Some(pw) = pw {
        v.check(
            pw.chars().count() >= password::MIN_LENGTH,
            "password",
            "must be at least 12 characters",
        );
        v.check(pw.len() <= 1024, "password", "must be at most 1024 bytes");
    }
}

pub async fn create_user(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateUser,
) -> ApiResult<User> {
    require(p, Action::ManageDirectory)?;
    let username = input.username.trim().to_lowercase();
    let display_name = input
        .display_name
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or(&username)
        .to_string();
    let email = input
        .email
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let mut v = Validator::default();
    v.check(
        slug_ok(&username),
        "username",
        "use 1 to 63 lower-case letters, digits, '-', '_' or '.'",
    );
    v.check(
        display_name.chars().count() <= 100,
        "display_name",
        "must be at most 100 characters",
    );
    v.check(clean_text(&display_name), "display_name", UNCLEAN);
    v.check(
        email.as_deref().is_none_or(email_ok),
        "email",
        "is not an email address",
    );
    validate_password(&mut v, &input.password);
    v.finish()?;
    let hash = password::hash_off_runtime(input.password.clone()).await?;
    insert_user(
        store,
        p.tenant_id(),
        &Actor::of(p),
        meta,
        &username,
        &display_name,
        email,
        hash,
        input.is_tenant_admin,
        false,
    )
    .await
}

/// Inserts a user with its audit entry (also used by the CLI and the demo seeding).
#[allow(clippy::too_many_arguments)]
pub async fn insert_user(
    store: &Store,
    tenant_id: &str,
    actor: &Actor,
    meta: &RequestMeta,
    username: &str,
    display_name: &str,
    email: Option<String>,
    password_hash: Option<String>,
    is_tenant_admin: bool,
    is_platform_admin: bool,
) -> ApiResult<User> {
    let now = store.now();
    let user = User {
        id: new_id(),
        tenant_id: tenant_id.to_string(),
        username: username.to_string(),
        display_name: display_name.to_string(),
        email,
        is_tenant_admin,
        is_platform_admin,
        disabled: false,
        has_password: password_hash.is_some(),
        created_at: now,
    };
    let mut tx = store.begin_write().await?;
    let row = NewUserRow {
        id: &user.id,
        tenant_id,
        username: &user.username,
        display_name: &user.display_name,
        email: user.email.as_deref(),
        password_hash: password_hash.as_deref(),
        is_tenant_admin,
        is_platform_admin,
        disabled: false,
        external_id: None,
        provisioned_by: None,
        scim_name: None,
        created_at: now,
    };
    insert_user_row(&mut tx, &row).await.map_err(|e| {
        unique_violation_as(
            e,
            AppError::field("username", "is already taken in this tenant"),
        )
    })?;
    audit::append(&mut tx, now, Record {
        tenant_id,
        actor,
        action: "user.create",
        target_kind: "user",
        target_id: &user.id,
        summary: json!({"username": user.username, "display_name": user.display_name, "email": user.email, "is_tenant_admin": is_tenant_admin, "is_platform_admin": is_platform_admin, "password": user.has_password}),
        meta,
    })
    .await?;
    tx.commit().await?;
    Ok(user)
}

pub async fn update_user(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    input: UpdateUser,
) -> ApiResult<User> {
    require(p, Action::ManageDirectory)?;
    let current = get_user(store, p, id).await?;
    guard_platform_admin(p, &current)?;
    let mut v = Validator::default();
    if let Some(d) = &input.display_name {
        v.check(
            !d.trim().is_empty() && d.chars().count() <= 100,
            "display_name",
            "must be 1 to 100 characters",
        );
        v.check(clean_text(d), "display_name", UNCLEAN);
    }
    if let Some(e) = &input.email {
        v.check(
            e.is_empty() || email_ok(e.trim()),
            "email",
            "is not an email address",
        );
    }
    validate_password(&mut v, &input.password);
    if id == p.user_id() {
        v.check(
            input.disabled != Some(true),
            "disabled",
            "you cannot disable your own account",
        );
        v.check(
            input.is_tenant_admin != Some(false) || p.me.is_platform_admin,
            "is_tenant_admin",
            "you cannot remove your own admin role",
        );
    }
    v.finish()?;
    let display_name = input
        .display_name
        .map(|d| d.trim().to_string())
        .unwrap_or(current.display_name.clone());
    let email = match input.email {
        Some(e) if e.trim().is_empty() => None,
        Some(e) => Some(e.trim().to_string()),
        None => current.email.clone(),
    };
    let is_tenant_admin = input.is_tenant_admin.unwrap_or(current.is_tenant_admin);
    let disabled = input.disabled.unwrap_or(current.disabled);
    let new_hash = password::hash_off_runtime(input.password.clone()).await?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    sqlx::query("UPDATE users SET display_name = $1, email = $2, is_tenant_admin = $3, disabled = $4 WHERE tenant_id = $5 AND id = $6")
        .bind(&display_name)
        .bind(email.clone())
        .bind(flag(is_tenant_admin))
        .bind(flag(disabled))
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    if let Some(h) = &new_hash {
        set_password_hash(&mut tx, p.tenant_id(), id, Some(h)).await?;
    }
    // A disabled account or a changed password ends every open browser session at once; a
    // password set by someone else (a reset) revokes the user's API tokens too. A user changing
    // their own password keeps their tokens (the audit entry says so).
    let own_change = id == p.user_id();
    let mut tokens_revoked = 0;
    if disabled || new_hash.is_some() {
        let revoke = disabled || !own_change;
        tokens_revoked = end_access(&mut tx, p.tenant_id(), id, now, revoke).await?;
    }
    let mut changes = serde_json::Map::new();
    if display_name != current.display_name {
        changes.insert(
            "display_name".into(),
            json!({"from": current.display_name, "to": display_name}),
        );
    }
    if email != current.email {
        changes.insert("email".into(), json!({"from": current.email, "to": email}));
    }
    if is_tenant_admin != current.is_tenant_admin {
        changes.insert(
            "is_tenant_admin".into(),
            json!({"from": current.is_tenant_admin, "to": is_tenant_admin}),
        );
    }
    if disabled != current.disabled {
        changes.insert(
            "disabled".into(),
            json!({"from": current.disabled, "to": disabled}),
        );
    }
    if new_hash.is_some() {
        changes.insert("password".into(), json!("changed"));
        changes.insert(
            "api_tokens".into(),
            if own_change {
                json!("kept (own change)")
            } else {
                json!({"revoked": tokens_revoked})
            },
        );
    }
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "user.update",
        "user",
        id,
        json!({"username": current.username, "changes": changes}),
    )
    .await?;
    tx.commit().await?;
    get_user(store, p, id).await
}

/// Only platform admins may change, disable or delete a platform admin's account: a tenant
/// admin of the platform tenant must not be able to take one over.
fn guard_platform_admin(p: &Principal, target: &User) -> Result<(), AppError> {
    if target.is_platform_admin && !p.me.is_platform_admin {
        return Err(AppError::Forbidden);
    }
    Ok(())
}

/// Ends what a user's old credentials opened, inside the caller's transaction: every browser
/// session, and with `revoke_tokens` every API token still valid (marked revoked, so the token
/// list shows why it stopped working). Returns how many tokens were revoked.
pub async fn end_access(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    now: i64,
    revoke_tokens: bool,
) -> Result<u64, sqlx::Error> {
    tokens::end_sessions_of(tx, tenant_id, user_id).await?;
    if !revoke_tokens {
        return Ok(0);
    }
    tokens::revoke_tokens_of(tx, tenant_id, user_id, now).await
}

/// Deletes a user with their sessions, tokens and memberships, inside the caller's transaction.
pub async fn purge_user(tx: &mut WriteTx, tenant_id: &str, id: &str) -> Result<(), sqlx::Error> {
    tx.access_changed();
    tokens::delete_credentials_of(tx, tenant_id, id).await?;
    for sql in [
        "DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2",
        "DELETE FROM users WHERE tenant_id = $1 AND id = $2",
    ] {
        sqlx::query(sql)
            .bind(tenant_id)
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
    }
    Ok(())
}

pub async fn delete_user(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManageDirectory)?;
    let user = get_user(store, p, id).await?;
    guard_platform_admin(p, &user)?;
    if id == p.user_id() {
        return Err(AppError::Conflict("You cannot delete your own account".into()).into());
    }
    let now = store.now();
    let mut tx = store.begin_write().await?;
    purge_user(&mut tx, p.tenant_id(), id).await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "user.delete",
        "user",
        id,
        json!({"username": user.username}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

// ---- rows: the only statements that write `users` ----------------------------------------

/// A user row as every writer inserts it: the API, SCIM, SSO's just-in-time creation, the CLI
/// and the demo.
pub struct NewUserRow<'a> {
    pub id: &'a str,
    pub tenant_id: &'a str,
    pub username: &'a str,
    pub display_name: &'a str,
    pub email: Option<&'a str>,
    pub password_hash: Option<&'a str>,
    pub is_tenant_admin: bool,
    pub is_platform_admin: bool,
    pub disabled: bool,
    /// SCIM: the IdP's id for the user, and who provisioned it (`scim`).
    pub external_id: Option<&'a str>,
    pub provisioned_by: Option<&'a str>,
    /// SCIM: the `name` complex attribute as sent (JSON).
    pub scim_name: Option<&'a str>,
    pub created_at: i64,
}

/// Inserts a user row in the caller's transaction (a taken username is a unique violation).
pub async fn insert_user_row(tx: &mut WriteTx, u: &NewUserRow<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO users (id, tenant_id, username, display_name, email, password_hash, is_tenant_admin, is_platform_admin, disabled, created_at, external_id, provisioned_by, scim_name)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(u.id)
    .bind(u.tenant_id)
    .bind(u.username)
    .bind(u.display_name)
    .bind(u.email)
    .bind(u.password_hash)
    .bind(flag(u.is_tenant_admin))
    .bind(flag(u.is_platform_admin))
    .bind(flag(u.disabled))
    .bind(u.created_at)
    .bind(u.external_id)
    .bind(u.provisioned_by)
    .bind(u.scim_name)
    .execute(&mut *tx.tx)
    .await?;
    Ok(())
}

/// Keeps a user's name and e-mail as the IdP has them (each only when given).
pub async fn set_profile_from_idp(
    tx: &mut WriteTx,
    user_id: &str,
    display_name: Option<&str>,
    email: Option<&str>,
) -> Result<(), sqlx::Error> {
    let mut changed = 0;
    if let Some(d) = display_name {
        changed +=
            sqlx::query("UPDATE users SET display_name = $1 WHERE id = $2 AND display_name <> $1")
                .bind(d)
                .bind(user_id)
                .execute(&mut *tx.tx)
                .await?
                .rows_affected();
    }
    if let Some(e) = email {
        changed += sqlx::query(
            "UPDATE users SET email = $1 WHERE id = $2 AND (email IS NULL OR email <> $1)",
        )
        .bind(e)
        .bind(user_id)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
    }
    if changed > 0 {
        // Callers known by their tokens are read again (`identity::tokens`).
        tx.access_changed();
    }
    Ok(())
}

/// Sets (or, with `None`, removes) a user's password hash.
pub async fn set_password_hash(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    hash: Option<&str>,
) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query("UPDATE users SET password_hash = $1 WHERE tenant_id = $2 AND id = $3")
            .bind(hash)
            .bind(tenant_id)
            .bind(user_id)
            .execute(&mut *tx.tx)
            .await?
            .rows_affected(),
    )
}

/// What SCIM keeps of a user.
pub struct ScimUserFields<'a> {
    pub display_name: &'a str,
    pub email: Option<&'a str>,
    pub external_id: Option<&'a str>,
    pub disabled: bool,
    pub scim_name: Option<&'a str>,
}

/// Writes what SCIM keeps of a user that `only_if` (an SQL condition on `users`, such as "not
/// a local account") allows. Returns how many rows changed (0: not found or not allowed).
pub async fn set_scim_fields(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    f: &ScimUserFields<'_>,
    only_if: &str,
) -> Result<u64, sqlx::Error> {
    tx.access_changed();
    Ok(sqlx::query(&format!(
        "UPDATE users SET display_name = $1, email = $2, external_id = $3, disabled = $4, scim_name = $5 WHERE tenant_id = $6 AND id = $7 AND {only_if}"
    ))
    .bind(f.display_name)
    .bind(f.email)
    .bind(f.external_id)
    .bind(flag(f.disabled))
    .bind(f.scim_name)
    .bind(tenant_id)
    .bind(user_id)
    .execute(&mut *tx.tx)
    .await?
    .rows_affected())
}

/// Renames a user (a taken name is a unique violation); 0 when the name is unchanged.
pub async fn rename_user(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
    username: &str,
) -> Result<u64, sqlx::Error> {
    let n = sqlx::query(
        "UPDATE users SET username = $1 WHERE tenant_id = $2 AND id = $3 AND username <> $1",
    )
    .bind(username)
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
