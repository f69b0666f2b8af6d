//! REST handlers for single sign-on: a tenant's identity providers (`/idp`, tenant admins),
//! "test connection", tenant sign-in settings, and the public sign-in options of a tenant.

use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::access::Action;
use app::model::*;

use super::{self as sso, ldap, oidc};
use crate::config::Config;
use crate::http::error::{ApiResult, Problem};
use crate::http::extract::ApiJson;
use crate::http::require;
use crate::http::Caller;
use crate::identity::sso::oidc::DiscoveryCache;
use crate::store::Store;

pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
    Arc<Config>: FromRef<S>,
    Arc<DiscoveryCache>: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list_providers, create_provider))
        .routes(routes!(get_provider, update_provider, delete_provider))
        .routes(routes!(test_provider))
        .routes(routes!(set_sign_in_settings))
        .routes(routes!(sign_in_options))
        .routes(routes!(issue_scim_token, revoke_scim_token))
}

/// The tenant's identity providers (secrets are never returned).
#[utoipa::path(get, path = "/idp", tag = "sso", responses((status = 200, body = Vec<IdentityProvider>), (status = 401, body = Problem), (status = 403, body = Problem)))]
async fn list_providers(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, _): Caller,
) -> ApiResult<Json<Vec<IdentityProvider>>> {
    Ok(Json(sso::list_providers(&store, &config, &p).await?))
}

/// Add an identity provider (OIDC). Register `redirect_uri` from the answer at the IdP.
#[utoipa::path(post, path = "/idp", tag = "sso", request_body = SaveIdentityProvider, responses((status = 201, body = IdentityProvider), (status = 403, body = Problem), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_provider(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<SaveIdentityProvider>,
) -> ApiResult<(StatusCode, Json<IdentityProvider>)> {
    let idp = sso::create_provider(&store, &config, &p, &meta, input).await?;
    Ok((StatusCode::CREATED, Json(idp)))
}

#[utoipa::path(get, path = "/idp/{id}", tag = "sso", params(("id" = String, Path)), responses((status = 200, body = IdentityProvider), (status = 404, body = Problem)))]
async fn get_provider(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<IdentityProvider>> {
    Ok(Json(
        sso::provider_row(&store, &p, &id).await?.public(&config),
    ))
}

/// Replace a provider's settings; an absent `client_secret` keeps the stored one.
#[utoipa::path(put, path = "/idp/{id}", tag = "sso", params(("id" = String, Path)), request_body = SaveIdentityProvider, responses((status = 200, body = IdentityProvider), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn update_provider(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<SaveIdentityProvider>,
) -> ApiResult<Json<IdentityProvider>> {
    Ok(Json(
        sso::update_provider(&store, &config, &p, &meta, &id, input).await?,
    ))
}

/// Remove a provider with the memberships it manages (its users stay).
#[utoipa::path(delete, path = "/idp/{id}", tag = "sso", params(("id" = String, Path)), responses((status = 204), (status = 404, body = Problem)))]
async fn delete_provider(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    sso::delete_provider(&store, &p, &meta, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Test connection: OIDC reads the discovery document and signing keys; LDAP connects, binds
/// the service account and finds the base DN. Each step is reported.
#[utoipa::path(post, path = "/idp/{id}/test", tag = "sso", params(("id" = String, Path)), responses((status = 200, body = Vec<ConnectionCheck>), (status = 404, body = Problem)))]
async fn test_provider(
    State(store): State<Store>,
    State(config): State<Arc<Config>>,
    State(discovery): State<Arc<DiscoveryCache>>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<ConnectionCheck>>> {
    let row = sso::provider_row(&store, &p, &id).await?;
    Ok(Json(test_connection(&config, &discovery, &row).await))
}

/// "Test connection" for a provider of any kind (the API and the settings page).
pub async fn test_connection(
    config: &Config,
    discovery: &DiscoveryCache,
    row: &sso::ProviderRow,
) -> Vec<ConnectionCheck> {
    match row.kind {
        ProviderKind::Ldap => ldap::test_connection(row, config.allow_private_idp_addresses).await,
        ProviderKind::Saml => super::saml::test_connection(config, row).await,
        ProviderKind::Oidc => {
            oidc::test_connection(discovery, row, config.allow_private_idp_addresses).await
        }
    }
}

/// Turn password sign-in on or off for the tenant (platform admins keep theirs).
#[utoipa::path(put, path = "/sign-in-settings", tag = "sso", request_body = SignInSettings, responses((status = 200, body = SignInSettings), (status = 403, body = Problem)))]
async fn set_sign_in_settings(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    ApiJson(input): ApiJson<SignInSettings>,
) -> ApiResult<Json<SignInSettings>> {
    require(&p, Action::ManageDirectory)?;
    Ok(Json(
        sso::set_sign_in_settings(&store, &p, &meta, input).await?,
    ))
}

/// What a tenant's sign-in page offers: its enabled providers and whether passwords work.
/// Public (no sign-in needed); an unknown organization answers as one with only passwords.
#[utoipa::path(get, path = "/sign-in/{tenant}", tag = "sso", security(()), params(("tenant" = String, Path)), responses((status = 200, body = SignInOptions)))]
async fn sign_in_options(
    State(store): State<Store>,
    Path(tenant): Path<String>,
) -> ApiResult<Json<SignInOptions>> {
    Ok(Json(sso::sign_in_options(&store, &tenant).await?))
}

/// The tenant's SCIM token, shown once.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ScimToken {
    /// Give it to the IdP's SCIM connector as the bearer token for `{public_url}/scim/v2`.
    pub token: String,
}

/// Issue the tenant's SCIM bearer token (replacing any earlier one).
#[utoipa::path(post, path = "/scim/token", tag = "sso", responses((status = 201, body = ScimToken), (status = 403, body = Problem)))]
async fn issue_scim_token(
    State(store): State<Store>,
    Caller(p, meta): Caller,
) -> ApiResult<(StatusCode, Json<ScimToken>)> {
    let token = crate::identity::scim::issue_token(&store, &p, &meta).await?;
    Ok((StatusCode::CREATED, Json(ScimToken { token })))
}

/// Revoke the tenant's SCIM token; SCIM requests fail from the next one.
#[utoipa::path(delete, path = "/scim/token", tag = "sso", responses((status = 204), (status = 403, body = Problem)))]
async fn revoke_scim_token(
    State(store): State<Store>,
    Caller(p, meta): Caller,
) -> ApiResult<StatusCode> {
    crate::identity::scim::revoke_token(&store, &p, &meta).await?;
    Ok(StatusCode::NO_CONTENT)
}
