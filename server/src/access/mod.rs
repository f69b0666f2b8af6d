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

use sqlx::Row;

use app::access::{can, effective, Action, Permission, ResourceKind, Rule, Scope, Subject, Target};
use app::model::*;

use crate::http::error::ApiResult;
use crate::http::require;
use crate::store::Store;

mod rules;
pub use rules::*;

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
                scope: Scope::from_ids(resource, project),
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

pub(crate) fn is_admin(p: &Principal) -> bool {
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
        let Some(table) = table_of(kind) else {
            continue;
        };
        for r in sqlx::query(&format!(
            "SELECT id, name, project_id, owner_id FROM {table} WHERE tenant_id = $1 ORDER BY name"
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
