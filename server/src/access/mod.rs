//! Group-based access rules over resources (REST under `/api/v1/access-rules`, audited), the
//! registered models and datasets they govern (`/api/v1/models`, `/api/v1/datasets`), and
//! "what can this user do" (`/api/v1/users/{id}/access`).
//!
//! Every decision goes through [`app::access::effective`], with the caller's groups, the
//! tenant's rules and the resource's project chain read on each request: adding a user to a
//! group (or the IdP sending it) grants at once, removing revokes at once, for sessions and API
//! tokens alike. A queue's own group always may use it; rules can open it to other groups.

pub mod api;

use std::collections::BTreeMap;

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::{can, effective, Action, Permission, ResourceKind, Rule, Scope, Subject, Target};
use app::model::*;

use crate::api::error::{ApiError, ApiResult, AppError, Validator};
use crate::api::text::{clean_text, UNCLEAN};
use crate::audit;
use crate::clock::now_ms;
use crate::identity::require;
use crate::store::{new_id, Store};

/// The groups the user is in now.
pub async fn groups_of(store: &Store, p: &Principal) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT group_id FROM memberships WHERE tenant_id = $1 AND user_id = $2")
        .bind(p.tenant_id())
        .bind(p.user_id())
        .fetch_all(&store.pool)
        .await
}

/// The tenant's rules for one kind of resource.
pub async fn rules_for(
    store: &Store,
    tenant_id: &str,
    kind: ResourceKind,
) -> Result<Vec<Rule>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT group_id, permission, resource_id, project_id FROM access_rules WHERE tenant_id = $1 AND resource_kind = $2",
    )
    .bind(tenant_id)
    .bind(kind.as_str())
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| {
            let resource: Option<String> = r.try_get("resource_id")?;
            let project: Option<String> = r.try_get("project_id")?;
            Ok(Rule {
                group_id: r.try_get("group_id")?,
                permission: Permission::parse(&r.try_get::<String, _>("permission")?)
                    .unwrap_or(Permission::View),
                kind,
                scope: match (resource, project) {
                    (Some(id), _) => Scope::Resource(id),
                    (None, Some(p)) => Scope::Project(p),
                    (None, None) => Scope::All,
                },
            })
        })
        .collect()
}

/// Every project of the tenant with its parent, read once per request.
pub async fn project_parents(
    store: &Store,
    tenant_id: &str,
) -> Result<BTreeMap<String, Option<String>>, sqlx::Error> {
    sqlx::query("SELECT id, parent_id FROM projects WHERE tenant_id = $1")
        .bind(tenant_id)
        .fetch_all(&store.pool)
        .await?
        .iter()
        .map(|r| Ok((r.try_get("id")?, r.try_get("parent_id")?)))
        .collect()
}

/// A project and its ancestors, nearest first (at most 32 levels).
pub fn project_chain(parents: &BTreeMap<String, Option<String>>, project_id: &str) -> Vec<String> {
    let mut chain = Vec::new();
    let mut cur = Some(project_id.to_string());
    while let Some(id) = cur {
        if chain.len() >= 32 || chain.contains(&id) || !parents.contains_key(&id) {
            break;
        }
        cur = parents.get(&id).cloned().flatten();
        chain.push(id);
    }
    chain
}

fn is_admin(p: &Principal) -> bool {
    p.me.is_tenant_admin || p.me.is_platform_admin
}

/// Whether the caller may submit to a queue: its own group's members always, others through a
/// `use` rule on queues.
pub async fn may_use_queue(
    store: &Store,
    p: &Principal,
    queue_id: &str,
    queue_group: &str,
) -> Result<bool, sqlx::Error> {
    if is_admin(p) {
        return Ok(true);
    }
    let groups = groups_of(store, p).await?;
    if groups.iter().any(|g| g == queue_group) {
        return Ok(true);
    }
    let rules = rules_for(store, p.tenant_id(), ResourceKind::Queue).await?;
    let subject = Subject {
        user_id: p.user_id(),
        groups: &groups,
        tenant_admin: false,
    };
    let target = Target {
        kind: ResourceKind::Queue,
        id: queue_id,
        projects: &[],
        owner: None,
    };
    Ok(can(&subject, &rules, &target, Permission::Use))
}

// ---- rules --------------------------------------------------------------------------------

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
fn table_of(kind: ResourceKind) -> Option<&'static str> {
    match kind {
        ResourceKind::Project => Some("projects"),
        ResourceKind::Job => Some("jobs"),
        ResourceKind::Model => Some("models"),
        ResourceKind::Dataset => Some("datasets"),
        ResourceKind::Queue => Some("queues"),
        ResourceKind::Endpoint => None,
    }
}

async fn exists(
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
    let now = now_ms();
    let id = new_id();
    let mut tx = store.begin_write().await?;
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
    let now = now_ms();
    let mut tx = store.begin_write().await?;
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

// ---- models and datasets ------------------------------------------------------------------

fn table(kind: ResourceKind) -> &'static str {
    if kind == ResourceKind::Model {
        "models"
    } else {
        "datasets"
    }
}

fn asset_from_row(kind: ResourceKind, r: &AnyRow) -> Result<Asset, sqlx::Error> {
    Ok(Asset {
        id: r.try_get("id")?,
        kind,
        project_id: r.try_get("project_id")?,
        name: r.try_get("name")?,
        location_uri: r.try_get("location_uri")?,
        metadata: serde_json::from_str(&r.try_get::<String, _>("metadata")?).unwrap_or_default(),
        owner_id: r.try_get("owner_id")?,
        permission: Permission::View,
        created_at: r.try_get("created_at")?,
    })
}

/// Evaluates the caller's permission on each asset; drops those they may not see.
async fn with_permissions(
    store: &Store,
    p: &Principal,
    kind: ResourceKind,
    rows: Vec<Asset>,
) -> Result<Vec<Asset>, sqlx::Error> {
    let groups = groups_of(store, p).await?;
    let rules = rules_for(store, p.tenant_id(), kind).await?;
    let subject = Subject {
        user_id: p.user_id(),
        groups: &groups,
        tenant_admin: is_admin(p),
    };
    let parents = project_parents(store, p.tenant_id()).await?;
    let mut out = Vec::new();
    for mut a in rows {
        let chain = project_chain(&parents, &a.project_id);
        let target = Target {
            kind,
            id: &a.id,
            projects: &chain,
            owner: a.owner_id.as_deref(),
        };
        if let Some(perm) = effective(&subject, &rules, &target) {
            a.permission = perm;
            out.push(a);
        }
    }
    Ok(out)
}

const ASSET_COLUMNS: &str = "id, project_id, name, location_uri, metadata, owner_id, created_at";

/// The models (or datasets) the caller may see, with what they may do with each.
pub async fn list_assets(
    store: &Store,
    p: &Principal,
    kind: ResourceKind,
) -> ApiResult<Vec<Asset>> {
    require(p, Action::ViewDirectory)?;
    let rows = sqlx::query(&format!(
        "SELECT {ASSET_COLUMNS} FROM {} WHERE tenant_id = $1 ORDER BY name, id",
        table(kind)
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?
    .iter()
    .map(|r| asset_from_row(kind, r))
    .collect::<Result<Vec<_>, _>>()?;
    Ok(with_permissions(store, p, kind, rows).await?)
}

/// One asset; 404 when the caller may not see it (as for another tenant's).
pub async fn get_asset(
    store: &Store,
    p: &Principal,
    kind: ResourceKind,
    id: &str,
) -> ApiResult<Asset> {
    require(p, Action::ViewDirectory)?;
    let row = sqlx::query(&format!(
        "SELECT {ASSET_COLUMNS} FROM {} WHERE tenant_id = $1 AND id = $2",
        table(kind)
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    let row = asset_from_row(kind, &row)?;
    with_permissions(store, p, kind, vec![row])
        .await?
        .pop()
        .ok_or_else(|| AppError::NotFound.into())
}

/// Registers a model or dataset in a project the caller may `use` (a project rule), owned by
/// the caller.
pub async fn create_asset(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    kind: ResourceKind,
    input: CreateAsset,
) -> ApiResult<Asset> {
    require(p, Action::ViewDirectory)?;
    let name = input.name.trim().to_string();
    let mut v = Validator::default();
    v.check(
        !name.is_empty() && name.chars().count() <= 200,
        "name",
        "must be 1 to 200 characters",
    );
    v.check(clean_text(&name), "name", UNCLEAN);
    v.check(
        !input.location_uri.trim().is_empty()
            && input.location_uri.len() <= 2000
            && url::Url::parse(input.location_uri.trim()).is_ok(),
        "location_uri",
        "must be a URI such as s3://bucket/path or hf://org/model",
    );
    v.check(clean_text(&input.location_uri), "location_uri", UNCLEAN);
    v.check(
        input.metadata.len() <= 100
            && input
                .metadata
                .iter()
                .all(|(k, val)| !k.is_empty() && k.len() <= 100 && val.len() <= 2000),
        "metadata",
        "at most 100 keys of up to 100 characters, values up to 2000",
    );
    v.check(
        input
            .metadata
            .iter()
            .all(|(k, val)| clean_text(k) && clean_text(val)),
        "metadata",
        UNCLEAN,
    );
    let project_ok = exists(store, "projects", p.tenant_id(), &input.project_id).await?;
    v.check(
        project_ok,
        "project_id",
        "no such project in your organization",
    );
    v.finish()?;
    if !is_admin(p) {
        let groups = groups_of(store, p).await?;
        let rules = rules_for(store, p.tenant_id(), ResourceKind::Project).await?;
        let chain = project_chain(
            &project_parents(store, p.tenant_id()).await?,
            &input.project_id,
        );
        let subject = Subject {
            user_id: p.user_id(),
            groups: &groups,
            tenant_admin: false,
        };
        let target = Target {
            kind: ResourceKind::Project,
            id: &input.project_id,
            projects: &chain,
            owner: None,
        };
        if !can(&subject, &rules, &target, Permission::Use) {
            return Err(AppError::field(
                "project_id",
                "you need `use` on this project to register into it",
            )
            .into());
        }
    }
    let now = now_ms();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    sqlx::query(&format!(
        "INSERT INTO {} (id, tenant_id, project_id, name, location_uri, metadata, owner_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        table(kind)
    ))
    .bind(&id)
    .bind(p.tenant_id())
    .bind(&input.project_id)
    .bind(&name)
    .bind(input.location_uri.trim())
    .bind(serde_json::to_string(&input.metadata).unwrap_or_else(|_| "{}".into()))
    .bind(p.user_id())
    .bind(now)
    .execute(&mut *tx.tx)
    .await
    .map_err(|e| {
        crate::api::error::unique_violation_as(
            e,
            AppError::field("name", "this project already has one with this name"),
        )
    })?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        &format!("{}.create", kind.as_str()),
        kind.as_str(),
        &id,
        json!({"name": name, "project_id": input.project_id, "location_uri": input.location_uri.trim()}),
    )
    .await?;
    tx.commit().await?;
    get_asset(store, p, kind, &id).await
}

/// Deletes an asset the caller may `manage`.
pub async fn delete_asset(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    kind: ResourceKind,
    id: &str,
) -> ApiResult<()> {
    let asset = get_asset(store, p, kind, id).await?;
    if asset.permission < Permission::Manage {
        return Err(ApiError(AppError::Forbidden));
    }
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    sqlx::query(&format!(
        "DELETE FROM {} WHERE tenant_id = $1 AND id = $2",
        table(kind)
    ))
    .bind(p.tenant_id())
    .bind(id)
    .execute(&mut *tx.tx)
    .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        &format!("{}.delete", kind.as_str()),
        kind.as_str(),
        id,
        json!({"name": asset.name}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

// ---- what can this user do ----------------------------------------------------------------

/// (kind, id, name, project, owner, the group a queue belongs to)
type Reachable = (
    ResourceKind,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// For admins: a user's groups and every queue, model, dataset and project they reach, with
/// the permission and where it comes from.
pub async fn user_access(store: &Store, p: &Principal, user_id: &str) -> ApiResult<UserAccess> {
    require(p, Action::ManageDirectory)?;
    let user = crate::identity::directory::get_user(store, p, user_id).await?;
    let groups: Vec<(String, String)> = sqlx::query(
        "SELECT g.id, g.name FROM memberships m JOIN groups g ON g.id = m.group_id WHERE m.tenant_id = $1 AND m.user_id = $2 ORDER BY g.name",
    )
    .bind(p.tenant_id())
    .bind(user_id)
    .fetch_all(&store.pool)
    .await?
    .iter()
    .map(|r| Ok((r.try_get("id")?, r.try_get("name")?)))
    .collect::<Result<_, sqlx::Error>>()?;
    let group_ids: Vec<String> = groups.iter().map(|(id, _)| id.clone()).collect();
    let name_of = |gid: &str| {
        groups
            .iter()
            .find(|(id, _)| id == gid)
            .map(|(_, n)| n.clone())
            .unwrap_or_default()
    };
    let admin = user.is_tenant_admin || user.is_platform_admin;
    let mut grants = Vec::new();
    let mut resources: Vec<Reachable> = Vec::new();
    for r in sqlx::query("SELECT q.id, q.name, pl.group_id FROM queues q JOIN policies pl ON pl.id = q.policy_id WHERE q.tenant_id = $1 ORDER BY q.name")
        .bind(p.tenant_id())
        .fetch_all(&store.pool)
        .await?
    {
        resources.push((
            ResourceKind::Queue,
            r.try_get("id")?,
            r.try_get("name")?,
            None,
            None,
            Some(r.try_get("group_id")?),
        ));
    }
    for kind in [ResourceKind::Model, ResourceKind::Dataset] {
        for r in sqlx::query(&format!(
            "SELECT id, name, project_id, owner_id FROM {} WHERE tenant_id = $1 ORDER BY name",
            table(kind)
        ))
        .bind(p.tenant_id())
        .fetch_all(&store.pool)
        .await?
        {
            resources.push((
                kind,
                r.try_get("id")?,
                r.try_get("name")?,
                Some(r.try_get("project_id")?),
                r.try_get("owner_id")?,
                None,
            ));
        }
    }
    for r in sqlx::query("SELECT id, name FROM projects WHERE tenant_id = $1 ORDER BY name")
        .bind(p.tenant_id())
        .fetch_all(&store.pool)
        .await?
    {
        let id: String = r.try_get("id")?;
        resources.push((
            ResourceKind::Project,
            id.clone(),
            r.try_get("name")?,
            Some(id),
            None,
            None,
        ));
    }
    let parents = project_parents(store, p.tenant_id()).await?;
    let mut rules_by_kind: BTreeMap<&'static str, Vec<Rule>> = BTreeMap::new();
    for (kind, id, name, project, owner, implicit) in resources {
        if !rules_by_kind.contains_key(kind.as_str()) {
            rules_by_kind.insert(kind.as_str(), rules_for(store, p.tenant_id(), kind).await?);
        }
        let rules = rules_by_kind
            .get(kind.as_str())
            .cloned()
            .unwrap_or_default();
        let chain = match &project {
            Some(pid) => project_chain(&parents, pid),
            None => Vec::new(),
        };
        let target = Target {
            kind,
            id: &id,
            projects: &chain,
            owner: owner.as_deref(),
        };
        let subject = Subject {
            user_id: &user.id,
            groups: &group_ids,
            tenant_admin: admin,
        };
        let mut permission = effective(&subject, &rules, &target);
        let mut via: Vec<String> = Vec::new();
        if admin {
            via.push("tenant admin".into());
        } else {
            if owner.as_deref() == Some(user.id.as_str()) {
                via.push("owner".into());
            }
            for g in &group_ids {
                let one = Subject {
                    user_id: "",
                    groups: std::slice::from_ref(g),
                    tenant_admin: false,
                };
                if effective(&one, &rules, &target).is_some() {
                    via.push(name_of(g));
                }
            }
            if let Some(qg) = &implicit {
                if group_ids.contains(qg) {
                    permission = permission.max(Some(Permission::Use));
                    let n = name_of(qg);
                    if !via.contains(&n) {
                        via.push(n);
                    }
                }
            }
        }
        if let Some(permission) = permission {
            grants.push(Grant {
                resource_kind: kind,
                resource_id: id,
                resource_name: name,
                permission,
                via,
            });
        }
    }
    Ok(UserAccess {
        user_id: user.id,
        username: user.username,
        tenant_admin: admin,
        groups: groups.into_iter().map(|(_, n)| n).collect(),
        grants,
    })
}
