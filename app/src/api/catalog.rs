//! Server functions of the catalog page: projects (a tree), models and datasets.

use super::*;
use crate::model::Catalog;
#[cfg(feature = "ssr")]
use crate::model::{CreateAsset, CreateProject, ResourceKind, UpdateProject};

#[server(prefix = "/_sf", endpoint = "catalog")]
pub async fn load_catalog() -> Result<Catalog, AppError> {
    ctx::reading(|c| async move { c.backend.catalog(&c.principal).await }).await
}

/// A project, at the top or under `parent_id` (empty: at the top).
#[server(prefix = "/_sf", endpoint = "projects/create")]
pub async fn create_project_form(
    csrf: String,
    name: String,
    description: String,
    parent_id: String,
) -> Result<crate::model::Project, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = CreateProject {
            name,
            description: Some(description),
            parent_id: (!parent_id.is_empty()).then_some(parent_id),
        };
        c.backend.create_project(&c.principal, &c.meta, input).await
    })
    .await
}

/// A project's name, description and parent (empty: at the top).
#[server(prefix = "/_sf", endpoint = "projects/update")]
pub async fn update_project_form(
    csrf: String,
    id: String,
    name: String,
    description: String,
    parent_id: String,
) -> Result<crate::model::Project, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = UpdateProject {
            name: Some(name),
            description: Some(description),
            parent_id: Some((!parent_id.is_empty()).then_some(parent_id)),
        };
        c.backend
            .update_project(&c.principal, &c.meta, &id, input)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "projects/delete")]
pub async fn delete_project_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_project(&c.principal, &c.meta, &id).await
    })
    .await
}

#[cfg(feature = "ssr")]
fn asset_kind(kind: &str) -> Result<ResourceKind, AppError> {
    match kind {
        "model" => Ok(ResourceKind::Model),
        "dataset" => Ok(ResourceKind::Dataset),
        _ => Err(AppError::field("kind", "choose a model or a dataset")),
    }
}

/// Registers a model in a project.
#[server(prefix = "/_sf", endpoint = "models/create")]
pub async fn create_model_form(
    csrf: String,
    project_id: String,
    name: String,
    location_uri: String,
) -> Result<crate::model::Asset, AppError> {
    register(csrf, ResourceKind::Model, project_id, name, location_uri).await
}

/// Registers a dataset in a project.
#[server(prefix = "/_sf", endpoint = "datasets/create")]
pub async fn create_dataset_form(
    csrf: String,
    project_id: String,
    name: String,
    location_uri: String,
) -> Result<crate::model::Asset, AppError> {
    register(csrf, ResourceKind::Dataset, project_id, name, location_uri).await
}

#[cfg(feature = "ssr")]
async fn register(
    csrf: String,
    kind: ResourceKind,
    project_id: String,
    name: String,
    location_uri: String,
) -> Result<crate::model::Asset, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = CreateAsset {
            project_id,
            name,
            location_uri: location_uri.trim().to_string(),
            metadata: Default::default(),
        };
        c.backend
            .create_asset(&c.principal, &c.meta, kind, input)
            .await
    })
    .await
}

/// Deletes a model or dataset; `id` is `<kind>:<id>`.
#[server(prefix = "/_sf", endpoint = "assets/delete")]
pub async fn delete_asset_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        let (kind, id) = id.split_once(':').ok_or(AppError::NotFound)?;
        let kind = asset_kind(kind)?;
        c.backend
            .delete_asset(&c.principal, &c.meta, kind, id)
            .await
    })
    .await
}
