//! The demo's catalog: acme's models and datasets in its projects, and the access rules that
//! let its groups use them, made through the same calls as the API's (with their audit
//! entries).

use app::model::{CreateAccessRule, CreateAsset, Permission, RequestMeta, ResourceKind};

use super::{principal, People};
use crate::catalog;
use crate::identity::directory::{self, ListParams};
use crate::store::Store;

/// (kind, name, project, location)
const ASSETS: &[(ResourceKind, &str, &str, &str)] = &[
    (
        ResourceKind::Model,
        "llama-3.1-8b-instruct",
        "llm-finetune",
        "hf://meta-llama/Llama-3.1-8B-Instruct",
    ),
    (
        ResourceKind::Model,
        "yolov8-detector",
        "vision-detection",
        "s3://acme-models/yolov8/",
    ),
    (
        ResourceKind::Dataset,
        "coco-2017",
        "vision",
        "s3://acme-data/coco-2017/",
    ),
    (
        ResourceKind::Dataset,
        "support-chats-2026",
        "llm-finetune",
        "s3://acme-data/support-chats/",
    ),
];

/// (group, permission, kind, project subtree)
const RULES: &[(&str, Permission, ResourceKind, &str)] = &[
    (
        "ml-research",
        Permission::Use,
        ResourceKind::Model,
        "llm-finetune",
    ),
    (
        "ml-research",
        Permission::Use,
        ResourceKind::Dataset,
        "vision",
    ),
    (
        "data-eng",
        Permission::Manage,
        ResourceKind::Dataset,
        "llm-finetune",
    ),
    (
        "inference",
        Permission::Use,
        ResourceKind::Model,
        "vision-detection",
    ),
];

pub(super) async fn seed_catalog(
    store: &Store,
    people: &People,
    meta: &RequestMeta,
) -> anyhow::Result<()> {
    let err = |e: crate::http::error::ApiError| anyhow::anyhow!("demo catalog: {:?}", e.0);
    let alice = principal(people, "acme", "alice")?;
    let projects = directory::list_projects(store, &alice, &ListParams::all())
        .await
        .map_err(err)?
        .items;
    let groups = directory::list_groups(store, &alice, &ListParams::all())
        .await
        .map_err(err)?
        .items;
    let project = |name: &str| {
        projects
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.id.clone())
            .ok_or_else(|| anyhow::anyhow!("demo: no project {name}"))
    };
    for (kind, name, in_project, location) in ASSETS {
        let input = CreateAsset {
            project_id: project(in_project)?,
            name: (*name).into(),
            location_uri: (*location).into(),
            metadata: Default::default(),
        };
        catalog::create_asset(store, &alice, meta, *kind, input)
            .await
            .map_err(err)?;
    }
    for (group, permission, kind, subtree) in RULES {
        let group_id = groups
            .iter()
            .find(|g| g.name == *group)
            .map(|g| g.id.clone())
            .ok_or_else(|| anyhow::anyhow!("demo: no group {group}"))?;
        let input = CreateAccessRule {
            group_id,
            permission: *permission,
            resource_kind: *kind,
            resource_id: None,
            project_id: Some(project(subtree)?),
        };
        crate::access::create_rule(store, &alice, meta, input)
            .await
            .map_err(err)?;
    }
    Ok(())
}
