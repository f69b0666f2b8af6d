//! Groups and their members: the `groups` and `memberships` tables.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::*;
use crate::audit::{self};
use crate::http::error::ApiError;
use crate::http::error::{unique_violation_as, ApiResult, AppError};
use crate::http::require;
use crate::store::{in_use, new_id, Store, WriteTx};

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

pub async fn create_group(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateGroup,
) -> ApiResult<Group> {
    require(p, Action::ManageDirectory)?;
    let (name, description) = named(&input.name, &input.description.unwrap_or_default())?;
    let now = store.now();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    let row = NewGroupRow {
        id: &id,
        tenant_id: p.tenant_id(),
        name: &name,
        description: &description,
        display_name: None,
        external_id: None,
        created_at: now,
    };
    insert_group_row(&mut tx, &row).await.map_err(|e| {
        unique_violation_as(e, AppError::field("name", "a group with this name exists"))
    })?;
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
    let (name, description) = named(
        input.name.as_deref().unwrap_or(&current.name),
        input.description.as_deref().unwrap_or(&current.description),
    )?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    // A queue names its group: submits read it with the queue (store/config_cache.rs).
    tx.config_changed();
    rename_row(
        &mut tx,
        Named::Group,
        p.tenant_id(),
        id,
        &name,
        &description,
    )
    .await?;
    let summary = rename_summary((&current.name, &current.description), (&name, &description));
    audit::record(&mut tx, now, p, meta, "group.update", "group", id, summary).await?;
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
    let now = store.now();
    let mut tx = store.begin_write().await?;
    // A queue names its group: submits read it with the queue (store/config_cache.rs).
    tx.config_changed();
    if let Some(why) = in_use::group(&mut tx, p.tenant_id(), id).await? {
        return Err(AppError::Conflict(why).into());
    }
    delete_group_row(&mut tx, p.tenant_id(), id).await?;
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
    let now = store.now();
    let mut tx = store.begin_write().await?;
    insert_membership(
        &mut tx,
        p.tenant_id(),
        group_id,
        user_id,
        now,
        MemberSource::Local,
    )
    .await
    .map_err(|e| {
        unique_violation_as(
            e,
            AppError::Conflict(format!(
                "{} is already a member of {}",
                user.username, group.name
            )),
        )
    })?;
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
    let now = store.now();
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
    delete_membership(&mut tx, p.tenant_id(), group_id, user_id, "TRUE").await?;
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

// ---- rows: the only statements that write `groups` and `memberships` ------------------------

/// A group row as every writer inserts it (the API, SCIM, the demo).
pub struct NewGroupRow<'a> {
    pub id: &'a str,
    pub tenant_id: &'a str,
    pub name: &'a str,
    pub description: &'a str,
    /// SCIM: the name the IdP gave it, and its id there.
    pub display_name: Option<&'a str>,
    pub external_id: Option<&'a str>,
    pub created_at: i64,
}

/// Inserts a group row (a taken name is a unique violation).
pub async fn insert_group_row(tx: &mut WriteTx, g: &NewGroupRow<'_>) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO groups (id, tenant_id, name, description, created_at, display_name, external_id) VALUES ($1, $2, $3, $4, $5, $6, $7)")
        .bind(g.id)
        .bind(g.tenant_id)
        .bind(g.name)
        .bind(g.description)
        .bind(g.created_at)
        .bind(g.display_name)
        .bind(g.external_id)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// Sets what SCIM keeps of a group: its display name and external id.
pub async fn set_group_scim_fields(
    tx: &mut WriteTx,
    tenant_id: &str,
    group_id: &str,
    display_name: &str,
    external_id: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE groups SET display_name = $1, external_id = $2 WHERE tenant_id = $3 AND id = $4",
    )
    .bind(display_name)
    .bind(external_id)
    .bind(tenant_id)
    .bind(group_id)
    .execute(&mut *tx.tx)
    .await?;
    Ok(())
}

/// Deletes a group and its memberships.
pub async fn delete_group_row(
    tx: &mut WriteTx,
    tenant_id: &str,
    group_id: &str,
) -> Result<u64, sqlx::Error> {
    tx.access_changed();
    sqlx::query("DELETE FROM memberships WHERE tenant_id = $1 AND group_id = $2")
        .bind(tenant_id)
        .bind(group_id)
        .execute(&mut *tx.tx)
        .await?;
    Ok(
        sqlx::query("DELETE FROM groups WHERE tenant_id = $1 AND id = $2")
            .bind(tenant_id)
            .bind(group_id)
            .execute(&mut *tx.tx)
            .await?
            .rows_affected(),
    )
}

/// Where a membership comes from: added by hand, by SCIM, or by an IdP's group sync (the
/// provider's id). Sync removes only its own.
#[derive(Clone, Copy, Debug)]
pub enum MemberSource<'a> {
    Local,
    Scim,
    Provider(&'a str),
}

impl MemberSource<'_> {
    fn as_str(&self) -> &str {
        match self {
            MemberSource::Local => "local",
            MemberSource::Scim => "scim",
            MemberSource::Provider(id) => id,
        }
    }
}

/// Adds a user to a group (already a member: a unique violation).
pub async fn insert_membership(
    tx: &mut WriteTx,
    tenant_id: &str,
    group_id: &str,
    user_id: &str,
    now: i64,
    source: MemberSource<'_>,
) -> Result<(), sqlx::Error> {
    tx.access_changed();
    sqlx::query("INSERT INTO memberships (tenant_id, group_id, user_id, created_at, source) VALUES ($1, $2, $3, $4, $5)")
        .bind(tenant_id)
        .bind(group_id)
        .bind(user_id)
        .bind(now)
        .bind(source.as_str())
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// Removes a user from a group when the user matches `only_if` (an SQL condition on `users u`,
/// `TRUE` for any). Returns how many rows went.
pub async fn delete_membership(
    tx: &mut WriteTx,
    tenant_id: &str,
    group_id: &str,
    user_id: &str,
    only_if: &str,
) -> Result<u64, sqlx::Error> {
    tx.access_changed();
    Ok(sqlx::query(&format!(
        "DELETE FROM memberships WHERE tenant_id = $1 AND group_id = $2 AND user_id = $3
         AND user_id IN (SELECT u.id FROM users u WHERE {only_if})"
    ))
    .bind(tenant_id)
    .bind(group_id)
    .bind(user_id)
    .execute(&mut *tx.tx)
    .await?
    .rows_affected())
}

/// Removes every membership an IdP's group sync added (the provider is being deleted).
pub async fn delete_memberships_from(
    tx: &mut WriteTx,
    tenant_id: &str,
    source: MemberSource<'_>,
) -> Result<u64, sqlx::Error> {
    tx.access_changed();
    Ok(
        sqlx::query("DELETE FROM memberships WHERE tenant_id = $1 AND source = $2")
            .bind(tenant_id)
            .bind(source.as_str())
            .execute(&mut *tx.tx)
            .await?
            .rows_affected(),
    )
}
