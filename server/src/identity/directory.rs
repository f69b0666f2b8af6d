//! Users, groups, memberships and projects of one tenant. Every query is scoped by the caller's
//! tenant (from the principal); an id of another tenant is simply not found.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::{password, require};
use crate::api::error::{unique_violation_as, ApiResult, AppError, Validator};
use crate::api::text::{clean_multiline, clean_text, UNCLEAN};
use crate::audit::{self, Actor, Record};
use crate::clock::now_ms;
use crate::store::{flag, in_use, new_id, Store, WriteTx};

/// `limit` and `cursor` of a list request.
#[derive(Clone, Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Page size, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl ListParams {
    pub fn all() -> Self {
        ListParams {
            limit: Some(500),
            cursor: None,
        }
    }
    fn limit(&self) -> ApiResult<i64> {
        let l = self.limit.unwrap_or(100);
        if (1..=500).contains(&l) {
            Ok(l)
        } else {
            Err(AppError::field("limit", "must be between 1 and 500").into())
        }
    }
}

fn paginate<T>(mut items: Vec<T>, limit: i64, key: impl Fn(&T) -> String) -> Page<T> {
    let next_cursor = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        items.last().map(key)
    } else {
        None
    };
    Page { items, next_cursor }
}

pub(crate) fn slug_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_' || b == b'.'
        })
        && s.as_bytes()[0].is_ascii_alphanumeric()
}

fn email_ok(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !s.contains(char::is_whitespace)
        && clean_text(s)
        && s.len() <= 254
}

// ---- users --------------------------------------------------------------------------------

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
    let now = now_ms();
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
    sqlx::query(
        "INSERT INTO users (id, tenant_id, username, display_name, email, password_hash, is_tenant_admin, is_platform_admin, disabled, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9)",
    )
    .bind(&user.id)
    .bind(tenant_id)
    .bind(&user.username)
    .bind(&user.display_name)
    .bind(user.email.clone())
    .bind(password_hash)
    .bind(flag(is_tenant_admin))
    .bind(flag(is_platform_admin))
    .bind(now)
    .execute(&mut *tx.tx)
    .await
        .map_err(|e| unique_violation_as(e, AppError::field("username", "is already taken in this tenant")))?;
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
    let now = now_ms();
    let mut tx = store.begin_write().await?;
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
        sqlx::query("UPDATE users SET password_hash = $1 WHERE tenant_id = $2 AND id = $3")
            .bind(h)
            .bind(p.tenant_id())
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
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
    sqlx::query("DELETE FROM sessions WHERE tenant_id = $1 AND user_id = $2")
        .bind(tenant_id)
        .bind(user_id)
        .execute(&mut *tx.tx)
        .await?;
    if !revoke_tokens {
        return Ok(0);
    }
    let done = sqlx::query(
        "UPDATE api_tokens SET revoked_at = $1 WHERE tenant_id = $2 AND user_id = $3 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(tenant_id)
    .bind(user_id)
    .execute(&mut *tx.tx)
    .await?;
    Ok(done.rows_affected())
}

/// Deletes a user with their sessions, tokens and memberships, inside the caller's transaction.
pub async fn purge_user(tx: &mut WriteTx, tenant_id: &str, id: &str) -> Result<(), sqlx::Error> {
    for sql in [
        "DELETE FROM sessions WHERE tenant_id = $1 AND user_id = $2",
        "DELETE FROM api_tokens WHERE tenant_id = $1 AND user_id = $2",
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
    let now = now_ms();
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

// ---- groups -------------------------------------------------------------------------------

const GROUP_SELECT: &str = "SELECT g.id, g.tenant_id, g.name, g.description, g.created_at,
    (SELECT COUNT(*) FROM memberships m WHERE m.group_id = g.id) AS member_count FROM groups g";

fn group_from_row(r: &AnyRow) -> Result<Group, sqlx::Error> {
    Ok(Group {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        name: r.try_get("name")?,
        description: r.try_get("description")?,
        member_count: r.try_get("member_count")?,
        created_at: r.try_get("created_at")?,
    })
}

pub async fn list_groups(store: &Store, p: &Principal, q: &ListParams) -> ApiResult<Page<Group>> {
    require(p, Action::ViewDirectory)?;
    let limit = q.limit()?;
    let rows = sqlx::query(&format!(
        "{GROUP_SELECT} WHERE g.tenant_id = $1 AND g.id > $2 ORDER BY g.id LIMIT $3"
    ))
    .bind(p.tenant_id())
    .bind(q.cursor.clone().unwrap_or_default())
    .bind(limit + 1)
    .fetch_all(&store.pool)
    .await?;
    let groups = rows
        .iter()
        .map(group_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(paginate(groups, limit, |g| g.id.clone()))
}

/// The groups the caller belongs to.
pub async fn my_groups(store: &Store, p: &Principal) -> ApiResult<Vec<Group>> {
    let rows = sqlx::query(&format!(
        "{GROUP_SELECT} WHERE g.tenant_id = $1 AND g.id IN (SELECT group_id FROM memberships WHERE tenant_id = $1 AND user_id = $2) ORDER BY g.name"
    ))
    .bind(p.tenant_id())
    .bind(p.user_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows
        .iter()
        .map(group_from_row)
        .collect::<Result<Vec<_>, _>>()?)
}

pub async fn get_group(store: &Store, p: &Principal, id: &str) -> ApiResult<Group> {
    require(p, Action::ViewDirectory)?;
    let row = sqlx::query(&format!(
        "{GROUP_SELECT} WHERE g.tenant_id = $1 AND g.id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(group_from_row(&row)?)
}

fn validate_group_name(v: &mut Validator, name: &str) {
    v.check(
        !name.is_empty() && name.chars().count() <= 64 && !name.contains(['/', '\n']),
        "name",
        "must be 1 to 64 characters, without '/'",
    );
    v.check(clean_text(name), "name", UNCLEAN);
}

pub async fn create_group(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateGroup,
) -> ApiResult<Group> {
    require(p, Action::ManageDirectory)?;
    let name = input.name.trim().to_string();
    let description = input.description.unwrap_or_default().trim().to_string();
    let mut v = Validator::default();
    validate_group_name(&mut v, &name);
    v.check(
        description.chars().count() <= 500,
        "description",
        "must be at most 500 characters",
    );
    v.check(clean_multiline(&description), "description", UNCLEAN);
    v.finish()?;
    let now = now_ms();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO groups (id, tenant_id, name, description, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&name)
        .bind(&description)
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a group with this name exists")))?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "group.create",
        "group",
        &id,
        json!({"name": name, "description": description}),
    )
    .await?;
    tx.commit().await?;
    Ok(Group {
        id,
        tenant_id: p.tenant_id().to_string(),
        name,
        description,
        member_count: 0,
        created_at: now,
    })
}

pub async fn update_group(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    input: UpdateGroup,
) -> ApiResult<Group> {
    require(p, Action::ManageDirectory)?;
    let current = get_group(store, p, id).await?;
    let name = input
        .name
        .map(|n| n.trim().to_string())
        .unwrap_or(current.name.clone());
    let description = input
        .description
        .map(|d| d.trim().to_string())
        .unwrap_or(current.description.clone());
    let mut v = Validator::default();
    validate_group_name(&mut v, &name);
    v.check(
        description.chars().count() <= 500,
        "description",
        "must be at most 500 characters",
    );
    v.check(clean_multiline(&description), "description", UNCLEAN);
    v.finish()?;
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    sqlx::query("UPDATE groups SET name = $1, description = $2 WHERE tenant_id = $3 AND id = $4")
        .bind(&name)
        .bind(&description)
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| {
            unique_violation_as(e, AppError::field("name", "a group with this name exists"))
        })?;
    audit::record(&mut tx, now, p, meta, "group.update", "group", id, json!({"name": {"from": current.name, "to": name}, "description": {"from": current.description, "to": description}})).await?;
    tx.commit().await?;
    get_group(store, p, id).await
}

pub async fn delete_group(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManageDirectory)?;
    let group = get_group(store, p, id).await?;
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    if let Some(why) = in_use::group(&mut tx, p.tenant_id(), id).await? {
        return Err(AppError::Conflict(why).into());
    }
    sqlx::query("DELETE FROM memberships WHERE tenant_id = $1 AND group_id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    sqlx::query("DELETE FROM groups WHERE tenant_id = $1 AND id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "group.delete",
        "group",
        id,
        json!({"name": group.name, "members_removed": group.member_count}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

pub async fn list_members(store: &Store, p: &Principal, group_id: &str) -> ApiResult<Vec<Member>> {
    get_group(store, p, group_id).await?;
    let rows = sqlx::query(
        "SELECT u.id, u.username, u.display_name, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id
         WHERE m.tenant_id = $1 AND m.group_id = $2 ORDER BY u.username",
    )
    .bind(p.tenant_id())
    .bind(group_id)
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(Member {
                user_id: r.try_get("id")?,
                username: r.try_get("username")?,
                display_name: r.try_get("display_name")?,
                added_at: r.try_get("created_at")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()
        .map_err(Into::into)
}

pub async fn add_member(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    group_id: &str,
    user_id: &str,
) -> ApiResult<Member> {
    require(p, Action::ManageDirectory)?;
    let group = get_group(store, p, group_id).await?;
    let user = match get_user(store, p, user_id).await {
        Err(ApiError(AppError::NotFound)) => {
            return Err(AppError::field("user_id", "no such user in this tenant").into())
        }
        other => other?,
    };
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO memberships (tenant_id, group_id, user_id, created_at) VALUES ($1, $2, $3, $4)")
        .bind(p.tenant_id())
        .bind(group_id)
        .bind(user_id)
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::Conflict(format!(
                "{} is already a member of {}",
                user.username, group.name
            ))
            ))?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "group.member_add",
        "group",
        group_id,
        json!({"group": group.name, "user_id": user.id, "username": user.username}),
    )
    .await?;
    tx.commit().await?;
    Ok(Member {
        user_id: user.id,
        username: user.username,
        display_name: user.display_name,
        added_at: now,
    })
}

pub async fn remove_member(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    group_id: &str,
    user_id: &str,
) -> ApiResult<()> {
    require(p, Action::ManageDirectory)?;
    let group = get_group(store, p, group_id).await?;
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    let row = sqlx::query(
        "SELECT u.username FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.tenant_id = $1 AND m.group_id = $2 AND m.user_id = $3",
    )
    .bind(p.tenant_id())
    .bind(group_id)
    .bind(user_id)
    .fetch_optional(&mut *tx.tx)
    .await?
    .ok_or(AppError::NotFound)?;
    let username: String = row.try_get("username")?;
    sqlx::query("DELETE FROM memberships WHERE tenant_id = $1 AND group_id = $2 AND user_id = $3")
        .bind(p.tenant_id())
        .bind(group_id)
        .bind(user_id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "group.member_remove",
        "group",
        group_id,
        json!({"group": group.name, "user_id": user_id, "username": username}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

use crate::api::error::ApiError;

// ---- projects -----------------------------------------------------------------------------

const PROJECT_COLUMNS: &str = "id, tenant_id, name, description, parent_id, created_at";

fn project_from_row(r: &AnyRow) -> Result<Project, sqlx::Error> {
    Ok(Project {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        name: r.try_get("name")?,
        description: r.try_get("description")?,
        parent_id: r.try_get("parent_id")?,
        created_at: r.try_get("created_at")?,
    })
}

pub async fn list_projects(
    store: &Store,
    p: &Principal,
    q: &ListParams,
) -> ApiResult<Page<Project>> {
    require(p, Action::ViewDirectory)?;
    let limit = q.limit()?;
    let rows = sqlx::query(&format!(
        "SELECT {PROJECT_COLUMNS} FROM projects WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3"
    ))
    .bind(p.tenant_id())
    .bind(q.cursor.clone().unwrap_or_default())
    .bind(limit + 1)
    .fetch_all(&store.pool)
    .await?;
    let items = rows
        .iter()
        .map(project_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(paginate(items, limit, |x| x.id.clone()))
}

pub async fn get_project(store: &Store, p: &Principal, id: &str) -> ApiResult<Project> {
    require(p, Action::ViewDirectory)?;
    let row = sqlx::query(&format!(
        "SELECT {PROJECT_COLUMNS} FROM projects WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(project_from_row(&row)?)
}

pub async fn create_project(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateProject,
) -> ApiResult<Project> {
    require(p, Action::ManageDirectory)?;
    let name = input.name.trim().to_string();
    let description = input.description.unwrap_or_default().trim().to_string();
    let mut v = Validator::default();
    validate_group_name(&mut v, &name);
    v.check(
        description.chars().count() <= 500,
        "description",
        "must be at most 500 characters",
    );
    v.check(clean_multiline(&description), "description", UNCLEAN);
    v.finish()?;
    if let Some(parent) = &input.parent_id {
        if get_project(store, p, parent).await.is_err() {
            return Err(AppError::field("parent_id", "no such project in this tenant").into());
        }
    }
    let now = now_ms();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO projects (id, tenant_id, name, description, parent_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&name)
        .bind(&description)
        .bind(input.parent_id.clone())
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a project with this name exists")))?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "project.create",
        "project",
        &id,
        json!({"name": name, "parent_id": input.parent_id}),
    )
    .await?;
    tx.commit().await?;
    Ok(Project {
        id,
        tenant_id: p.tenant_id().to_string(),
        name,
        description,
        parent_id: input.parent_id,
        created_at: now,
    })
}

pub async fn update_project(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    input: UpdateProject,
) -> ApiResult<Project> {
    require(p, Action::ManageDirectory)?;
    let current = get_project(store, p, id).await?;
    let name = input
        .name
        .map(|n| n.trim().to_string())
        .unwrap_or(current.name.clone());
    let description = input
        .description
        .map(|d| d.trim().to_string())
        .unwrap_or(current.description.clone());
    let mut v = Validator::default();
    validate_group_name(&mut v, &name);
    v.check(
        description.chars().count() <= 500,
        "description",
        "must be at most 500 characters",
    );
    v.check(clean_multiline(&description), "description", UNCLEAN);
    v.finish()?;
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    sqlx::query("UPDATE projects SET name = $1, description = $2 WHERE tenant_id = $3 AND id = $4")
        .bind(&name)
        .bind(&description)
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| {
            unique_violation_as(
                e,
                AppError::field("name", "a project with this name exists"),
            )
        })?;
    audit::record(&mut tx, now, p, meta, "project.update", "project", id, json!({"name": {"from": current.name, "to": name}, "description": {"from": current.description, "to": description}})).await?;
    tx.commit().await?;
    get_project(store, p, id).await
}

pub async fn delete_project(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManageDirectory)?;
    let project = get_project(store, p, id).await?;
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    if let Some(why) = in_use::project(&mut tx, p.tenant_id(), id).await? {
        return Err(AppError::Conflict(why).into());
    }
    sqlx::query("DELETE FROM projects WHERE tenant_id = $1 AND id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "project.delete",
        "project",
        id,
        json!({"name": project.name}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
