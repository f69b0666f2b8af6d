//! Access rules: the `access_rules` table, written only here.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::{Action, Permission, ResourceKind};
use app::model::*;

use crate::audit;
use crate::http::error::{ApiResult, AppError, Validator};
use crate::http::require;
use crate::store::{new_id, Store};

fn rule_from_row(r: &AnyRow) -> Result<AccessRule, sqlx::Error> {
    Ok(AccessRule {
        id: r.try_get("id")?,
        group_id: r.try_get("group_id")?,
        group_name: r.try_get("group_name")?,
        permission: Permission::parse(&r.try_get::<String, _>("permission")?)
            .unwrap_or(Permission::View),
        resource_kind: ResourceKind::parse(&r.try_get::<String, _>("resource_kind")?)
            .unwrap_or(ResourceKind::Project),
        resource_id: r.try_get("resource_id")?,
        project_id: r.try_get("project_id")?,
        created_at: r.try_get("created_at")?,
    })
}

const RULE_SELECT: &str = "SELECT a.id, a.group_id, g.name AS group_name, a.permission, a.resource_kind, a.resource_id, a.project_id, a.created_at
    FROM access_rules a JOIN groups g ON g.id = a.group_id";

pub async fn list_rules(store: &Store, p: &Principal) -> ApiResult<Vec<AccessRule>> {
    require(p, Action::ManageDirectory)?;
    let rows = sqlx::query(&format!(
        "{RULE_SELECT} WHERE a.tenant_id = $1 ORDER BY g.name, a.resource_kind, a.id"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows.iter().map(rule_from_row).collect::<Result<_, _>>()?)
}

/// The table a kind's resources live in, for the existence check of a one-resource rule.
pub(crate) fn table_of(kind: ResourceKind) -> Option<&'static str> {
    match kind {
        ResourceKind::Project => Some("projects"),
        ResourceKind::Job => Some("jobs"),
        ResourceKind::Model => Some("models"),
        ResourceKind::Dataset => Some("datasets"),
        ResourceKind::Queue => Some("queues"),
        ResourceKind::Endpoint => Some("endpoints"),
    }
}

pub(crate) async fn exists(
    store: &Store,
    table: &str,
    tenant_id: &str,
    id: &str,
) -> Result<bool, sqlx::Error> {
    let n: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM {table} WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(tenant_id)
    .bind(id)
    .fetch_one(&store.pool)
    .await?;
    Ok(n > 0)
}

pub async fn create_rule(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateAccessRule,
) -> ApiResult<AccessRule> {
    require(p, Action::ManageDirectory)?;
    let tenant = p.tenant_id();
    let mut v = Validator::default();
    v.check(
        exists(store, "groups", tenant, &input.group_id).await?,
        "group_id",
        "no such group in your organization",
    );
    v.check(
        !(input.resource_id.is_some() && input.project_id.is_some()),
        "resource_id",
        "name one resource or a project subtree, not both",
    );
    if let Some(id) = &input.resource_id {
        match table_of(input.resource_kind) {
            Some(table) => v.check(
                exists(store, table, tenant, id).await?,
                "resource_id",
                &format!(
                    "no such {} in your organization",
                    input.resource_kind.as_str()
                ),
            ),
            None => v.check(
                false,
                "resource_id",
                "endpoints are not registered yet: use a project subtree or all endpoints",
            ),
        };
    }
    if let Some(pid) = &input.project_id {
        v.check(
            exists(store, "projects", tenant, pid).await?,
            "project_id",
            "no such project in your organization",
        );
        v.check(
            input.resource_kind != ResourceKind::Queue,
            "project_id",
            "queues do not belong to projects: name the queue or grant all queues",
        );
    }
    v.finish()?;
    let now = store.now();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    sqlx::query("INSERT INTO access_rules (id, tenant_id, group_id, permission, resource_kind, resource_id, project_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
        .bind(&id)
        .bind(tenant)
        .bind(&input.group_id)
        .bind(input.permission.as_str())
        .bind(input.resource_kind.as_str())
        .bind(input.resource_id.clone())
        .bind(input.project_id.clone())
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "access.grant",
        "group",
        &input.group_id,
        json!({"rule_id": id, "permission": input.permission.as_str(), "kind": input.resource_kind.as_str(), "resource_id": input.resource_id, "project_id": input.project_id}),
    )
    .await?;
    tx.commit().await?;
    let row = sqlx::query(&format!(
        "{RULE_SELECT} WHERE a.tenant_id = $1 AND a.id = $2"
    ))
    .bind(tenant)
    .bind(&id)
    .fetch_one(&store.pool)
    .await?;
    Ok(rule_from_row(&row)?)
}

pub async fn delete_rule(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManageDirectory)?;
    let row = sqlx::query(&format!(
        "{RULE_SELECT} WHERE a.tenant_id = $1 AND a.id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    let rule = rule_from_row(&row)?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.access_changed();
    sqlx::query("DELETE FROM access_rules WHERE tenant_id = $1 AND id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "access.revoke",
        "group",
        &rule.group_id,
        json!({"rule_id": id, "group": rule.group_name, "permission": rule.permission.as_str(), "kind": rule.resource_kind.as_str()}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
