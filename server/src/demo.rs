//! Demo data for a first look: three tenants with users, groups, memberships and projects.
//! Seeded only into an empty database, through the same audited paths as real changes.

use app::model::{CreateTenant, RequestMeta};
use serde_json::json;

use crate::audit::{self, Actor, Record};
use crate::clock::now_ms;
use crate::identity::{directory, password};
use crate::store::{new_id, Store};

pub const PASSWORD: &str = "switchyard-demo";

struct DemoTenant {
    slug: &'static str,
    name: &'static str,
    // (username, display name, tenant admin, platform admin)
    users: &'static [(&'static str, &'static str, bool, bool)],
    // (group, description, members)
    groups: &'static [(&'static str, &'static str, &'static [&'static str])],
    // (project, parent)
    projects: &'static [(&'static str, Option<&'static str>)],
}

const TENANTS: &[DemoTenant] = &[
    DemoTenant {
        slug: "acme",
        name: "Acme Robotics",
        users: &[
            ("alice", "Alice Martin", true, false),
            ("bob", "Bob Chen", false, false),
            ("carol", "Carol Diaz", false, false),
            ("dan", "Dan Okafor", false, false),
        ],
        groups: &[
            ("ml-research", "Training and experiments", &["alice", "bob"]),
            ("inference", "Serving models to products", &["carol"]),
            ("data-eng", "Datasets and pipelines", &[]),
        ],
        projects: &[
            ("vision", None),
            ("vision-detection", Some("vision")),
            ("llm-finetune", None),
        ],
    },
    DemoTenant {
        slug: "globex",
        name: "Globex",
        users: &[
            ("erin", "Erin Walsh", true, false),
            ("frank", "Frank Meyer", false, false),
        ],
        groups: &[("research", "Forecasting research", &["erin", "frank"])],
        projects: &[("forecasting", None)],
    },
    DemoTenant {
        slug: "platform",
        name: "Platform operations",
        users: &[("root", "Platform Admin", true, true)],
        groups: &[],
        projects: &[],
    },
];

/// Seeds the demo if the database has no tenant yet. Returns whether it seeded.
pub async fn seed(store: &Store) -> anyhow::Result<bool> {
    let tenants: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tenants")
        .fetch_one(&store.pool)
        .await?;
    if tenants > 0 {
        return Ok(false);
    }
    let actor = Actor::system("demo-seed");
    let meta = RequestMeta {
        source_ip: "local".into(),
        request_id: "demo-seed".into(),
    };
    let hash = password::hash(PASSWORD)?;
    let err = |e: crate::api::error::ApiError| anyhow::anyhow!("demo seed: {:?}", e.0);
    for t in TENANTS {
        let tenant = crate::tenancy::insert_tenant(
            store,
            &actor,
            &meta,
            CreateTenant {
                slug: t.slug.into(),
                name: t.name.into(),
            },
        )
        .await
        .map_err(err)?;
        let mut ids = std::collections::HashMap::new();
        for (username, name, admin, platform) in t.users {
            let u = directory::insert_user(
                store,
                &tenant.id,
                &actor,
                &meta,
                username,
                name,
                Some(format!("{username}@{}.example", t.slug)),
                Some(hash.clone()),
                *admin,
                *platform,
            )
            .await
            .map_err(err)?;
            ids.insert(*username, u.id);
        }
        let mut project_ids = std::collections::HashMap::new();
        let now = now_ms();
        let mut tx = store.begin_write().await?;
        for (group, description, members) in t.groups {
            let gid = new_id();
            sqlx::query("INSERT INTO groups (id, tenant_id, name, description, created_at) VALUES ($1, $2, $3, $4, $5)")
                .bind(&gid).bind(&tenant.id).bind(*group).bind(*description).bind(now)
                .execute(&mut *tx.tx).await?;
            audit::append(
                &mut tx,
                now,
                Record {
                    tenant_id: &tenant.id,
                    actor: &actor,
                    action: "group.create",
                    target_kind: "group",
                    target_id: &gid,
                    summary: json!({"name": group}),
                    meta: &meta,
                },
            )
            .await?;
            for m in *members {
                let uid = &ids[m];
                sqlx::query("INSERT INTO memberships (tenant_id, group_id, user_id, created_at) VALUES ($1, $2, $3, $4)")
                    .bind(&tenant.id).bind(&gid).bind(uid).bind(now)
                    .execute(&mut *tx.tx).await?;
                audit::append(
                    &mut tx,
                    now,
                    Record {
                        tenant_id: &tenant.id,
                        actor: &actor,
                        action: "group.member_add",
                        target_kind: "group",
                        target_id: &gid,
                        summary: json!({"group": group, "user_id": uid, "username": m}),
                        meta: &meta,
                    },
                )
                .await?;
            }
        }
        for (project, parent) in t.projects {
            let pid = new_id();
            let parent_id = parent.and_then(|p| project_ids.get(p).cloned());
            sqlx::query("INSERT INTO projects (id, tenant_id, name, description, parent_id, created_at) VALUES ($1, $2, $3, '', $4, $5)")
                .bind(&pid).bind(&tenant.id).bind(*project).bind(parent_id.clone()).bind(now)
                .execute(&mut *tx.tx).await?;
            audit::append(
                &mut tx,
                now,
                Record {
                    tenant_id: &tenant.id,
                    actor: &actor,
                    action: "project.create",
                    target_kind: "project",
                    target_id: &pid,
                    summary: json!({"name": project, "parent_id": parent_id}),
                    meta: &meta,
                },
            )
            .await?;
            project_ids.insert(*project, pid);
        }
        tx.commit().await?;
    }
    Ok(true)
}
