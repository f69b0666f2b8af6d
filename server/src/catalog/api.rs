//! REST handlers: models and datasets (everyone, filtered by permission).

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::access::ResourceKind;
use app::model::*;

use crate::http::error::{ApiResult, Problem};
use crate::http::extract::ApiJson;
use crate::http::Caller;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list_models, create_model))
        .routes(routes!(get_model, delete_model))
        .routes(routes!(list_datasets, create_dataset))
        .routes(routes!(get_dataset, delete_dataset))
}

/// Registered models the caller may see, each with the caller's permission.
#[utoipa::path(get, path = "/models", tag = "access", responses((status = 200, body = Vec<Asset>)))]
async fn list_models(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<Asset>>> {
    Ok(Json(
        super::list_assets(&store, &p, ResourceKind::Model).await?,
    ))
}

/// Register a model in a project you may `use`; you own it.
#[utoipa::path(post, path = "/models", tag = "access", request_body = CreateAsset, responses((status = 201, body = Asset), (status = 422, body = Problem)))]
async fn create_model(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateAsset>,
) -> ApiResult<(StatusCode, Json<Asset>)> {
    let a = super::create_asset(&store, &p, &meta, ResourceKind::Model, input).await?;
    Ok((StatusCode::CREATED, Json(a)))
}

#[utoipa::path(get, path = "/models/{id}", tag = "access", params(("id" = String, Path)), responses((status = 200, body = Asset), (status = 404, body = Problem)))]
async fn get_model(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Asset>> {
    Ok(Json(
        super::get_asset(&store, &p, ResourceKind::Model, &id).await?,
    ))
}

/// Delete a model you may `manage`.
#[utoipa::path(delete, path = "/models/{id}", tag = "access", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn delete_model(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    super::delete_asset(&store, &p, &meta, ResourceKind::Model, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Registered datasets the caller may see, each with the caller's permission.
#[utoipa::path(get, path = "/datasets", tag = "access", responses((status = 200, body = Vec<Asset>)))]
async fn list_datasets(
    State(store): State<Store>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<Asset>>> {
    Ok(Json(
        super::list_assets(&store, &p, ResourceKind::Dataset).await?,
    ))
}

/// Register a dataset in a project you may `use`; you own it.
#[utoipa::path(post, path = "/datasets", tag = "access", request_body = CreateAsset, responses((status = 201, body = Asset), (status = 422, body = Problem)))]
async fn create_dataset(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<CreateAsset>,
) -> ApiResult<(StatusCode, Json<Asset>)> {
    let a = super::create_asset(&store, &p, &meta, ResourceKind::Dataset, input).await?;
    Ok((StatusCode::CREATED, Json(a)))
}

#[utoipa::path(get, path = "/datasets/{id}", tag = "access", params(("id" = String, Path)), responses((status = 200, body = Asset), (status = 404, body = Problem)))]
async fn get_dataset(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Asset>> {
    Ok(Json(
        super::get_asset(&store, &p, ResourceKind::Dataset, &id).await?,
    ))
}

/// Delete a dataset you may `manage`.
#[utoipa::path(delete, path = "/datasets/{id}", tag = "access", params(("id" = String, Path)), responses((status = 204), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn delete_dataset(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    super::delete_asset(&store, &p, &meta, ResourceKind::Dataset, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
