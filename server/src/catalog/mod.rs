//! The catalog: models and datasets (the `models` and `datasets` tables), registered in projects and shared through access rules.

pub mod api;

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::{can, effective, Action, Permission, ResourceKind, Subject, Target};
use app::model::*;

use crate::access::*;
use crate::audit;
use crate::http::error::{ApiError, ApiResult, AppError, Validator};
use crate::http::require;
use crate::http::text::{clean_text, UNCLEAN};
use crate::store::{new_id, Store};

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
    let now = store.now();
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
        crate::http::error::unique_violation_as(
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

/// The catalog page: the projects, the models and datasets the caller may see, and (for
/// those who manage the directory) the access rules to share them.
pub async fn page(store: &Store, p: &Principal) -> ApiResult<Catalog> {
    let admin = app::access::allowed(&p.me, Action::ManageDirectory);
    let all = crate::identity::directory::ListParams::all();
    Ok(Catalog {
        projects: crate::identity::directory::list_projects(store, p, &all)
            .await?
            .items,
        models: list_assets(store, p, ResourceKind::Model).await?,
        datasets: list_assets(store, p, ResourceKind::Dataset).await?,
        rules: if admin {
            crate::access::list_rules(store, p).await?
        } else {
            Vec::new()
        },
        admin,
    })
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
    let now = store.now();
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
