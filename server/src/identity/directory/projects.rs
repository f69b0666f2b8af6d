//! Projects: the `projects` table, a tree per tenant.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::*;
use crate::audit::{self};
use crate::http::error::{unique_violation_as, ApiResult, AppError};
use crate::http::require;
use crate::store::{in_use, new_id, Store, WriteTx};

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
    let (name, description) = named(&input.name, &input.description.unwrap_or_default())?;
    if let Some(parent) = &input.parent_id {
        if get_project(store, p, parent).await.is_err() {
            return Err(AppError::field("parent_id", "no such project in this tenant").into());
        }
    }
    let now = store.now();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    insert_project_row(
        &mut tx,
        &id,
        p.tenant_id(),
        &name,
        &description,
        input.parent_id.as_deref(),
        now,
    )
    .await
    .map_err(|e| {
        unique_violation_as(
            e,
            AppError::field("name", "a project with this name exists"),
        )
    })?;
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
    let (name, description) = named(
        input.name.as_deref().unwrap_or(&current.name),
        input.description.as_deref().unwrap_or(&current.description),
    )?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    rename_row(
        &mut tx,
        Named::Project,
        p.tenant_id(),
        id,
        &name,
        &description,
    )
    .await?;
    let parent = match input.parent_id {
        None => current.parent_id.clone(),
        Some(parent) => parent.filter(|id| !id.is_empty()),
    };
    let mut summary = rename_summary((&current.name, &current.description), (&name, &description));
    if parent != current.parent_id {
        move_row(&mut tx, p.tenant_id(), id, parent.as_deref()).await?;
        summary["parent_id"] = json!({"from": current.parent_id, "to": parent});
    }
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "project.update",
        "project",
        id,
        summary,
    )
    .await?;
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
    let now = store.now();
    let mut tx = store.begin_write().await?;
    if let Some(why) = in_use::project(&mut tx, p.tenant_id(), id).await? {
        return Err(AppError::Conflict(why).into());
    }
    tx.access_changed();
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

/// Moves project `id` under `parent` (`None`: to the top), refusing a parent that is not a
/// project of the tenant or lies inside the project itself (the tree would become a cycle).
async fn move_row(
    tx: &mut WriteTx,
    tenant_id: &str,
    id: &str,
    parent: Option<&str>,
) -> ApiResult<()> {
    if let Some(parent) = parent {
        let rows = sqlx::query("SELECT id, parent_id FROM projects WHERE tenant_id = $1")
            .bind(tenant_id)
            .fetch_all(&mut *tx.tx)
            .await?;
        let parent_of = |of: &str| -> Option<Option<String>> {
            rows.iter()
                .find(|r| r.try_get::<String, _>("id").is_ok_and(|x| x == of))
                .map(|r| r.try_get::<Option<String>, _>("parent_id").ok().flatten())
        };
        if parent_of(parent).is_none() {
            return Err(AppError::field("parent_id", "no such project in this tenant").into());
        }
        // Walk up from the new parent: meeting the project itself means a cycle.
        let mut next = Some(parent.to_string());
        let mut steps = 0;
        while let Some(at) = next.take() {
            if at == id {
                return Err(AppError::field(
                    "parent_id",
                    "a project cannot move inside itself or one of its sub-projects",
                )
                .into());
            }
            steps += 1;
            if steps > rows.len() {
                break;
            }
            next = parent_of(&at).flatten();
        }
    }
    tx.access_changed();
    sqlx::query("UPDATE projects SET parent_id = $1 WHERE tenant_id = $2 AND id = $3")
        .bind(parent)
        .bind(tenant_id)
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// Inserts a project row: the only statement that adds to `projects` (the API and the demo).
pub async fn insert_project_row(
    tx: &mut WriteTx,
    id: &str,
    tenant_id: &str,
    name: &str,
    description: &str,
    parent_id: Option<&str>,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO projects (id, tenant_id, name, description, parent_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(id)
        .bind(tenant_id)
        .bind(name)
        .bind(description)
        .bind(parent_id)
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}
