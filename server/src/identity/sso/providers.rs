//! A tenant's identity providers: listing, validating, storing (with their audit entries) and
//! the sign-in options a tenant's page shows.

use serde_json::json;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::*;

use super::link as sso_link;
use crate::audit::{self};
use crate::config::Config;
use crate::http::error::{unique_violation_as, ApiResult, AppError, Validator};
use crate::http::require;
use crate::http::text::{clean_text, UNCLEAN};
use crate::identity::directory::slug_ok;
use crate::store::{flag, new_id, Store};

pub async fn list_providers(
    store: &Store,
    config: &Config,
    p: &Principal,
) -> ApiResult<Vec<IdentityProvider>> {
    require(p, Action::ManageDirectory)?;
    let rows = sqlx::query(&format!(
        "{PROVIDER_SELECT} WHERE i.tenant_id = $1 ORDER BY i.name"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| provider_from_row(r).map(|row| row.public(config)))
        .collect::<Result<_, _>>()
        .map_err(Into::into)
}

/// A provider of the caller's tenant, secret included (server-side use only).
pub async fn provider_row(store: &Store, p: &Principal, id: &str) -> ApiResult<ProviderRow> {
    require(p, Action::ManageDirectory)?;
    let row = sqlx::query(&format!(
        "{PROVIDER_SELECT} WHERE i.tenant_id = $1 AND i.id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(provider_from_row(&row)?)
}

/// An enabled provider by tenant slug and provider name (for the sign-in routes).
pub async fn provider_by_name(
    store: &Store,
    tenant_slug: &str,
    name: &str,
) -> Result<Option<ProviderRow>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "{PROVIDER_SELECT} WHERE t.slug = $1 AND i.name = $2 AND i.enabled = 1"
    ))
    .bind(tenant_slug)
    .bind(name)
    .fetch_optional(&store.pool)
    .await?;
    row.as_ref().map(provider_from_row).transpose()
}

/// A provider by id, with no caller (the callback knows it from the sign-in in flight).
pub async fn provider_by_id(store: &Store, id: &str) -> Result<Option<ProviderRow>, sqlx::Error> {
    let row = sqlx::query(&format!("{PROVIDER_SELECT} WHERE i.id = $1"))
        .bind(id)
        .fetch_optional(&store.pool)
        .await?;
    row.as_ref().map(provider_from_row).transpose()
}

/// The rule [`url_ok`] checks, as the field error says it.
pub(crate) const URL_RULE: &str =
    "must be an https URL (http only for private addresses, where the server allows those)";

/// An IdP URL's form: https, or http where private IdP addresses are allowed (the address
/// itself is checked by [`super::outbound`]).
pub(crate) fn url_ok(u: &str, allow_private: bool) -> bool {
    url::Url::parse(u).is_ok_and(|url| {
        url.host().is_some()
            && (url.scheme() == "https" || (allow_private && url.scheme() == "http"))
    })
}

fn validate(
    input: &SaveIdentityProvider,
    has_secret: bool,
    allow_private: bool,
) -> Result<(), AppError> {
    let mut v = Validator::default();
    v.check(
        slug_ok(&input.name),
        "name",
        "use 1 to 63 lower-case letters, digits, '-', '_' or '.'",
    );
    v.check(
        !input.display_name.trim().is_empty() && input.display_name.chars().count() <= 100,
        "display_name",
        "must be 1 to 100 characters",
    );
    v.check(clean_text(&input.display_name), "display_name", UNCLEAN);
    v.check(
        KINDS.contains(&input.kind.as_str()),
        "kind",
        "must be `oidc`, `saml` or `ldap`",
    );
    if input.kind == "saml" && input.saml.is_none() {
        v.check(false, "saml", "SAML settings are required for kind `saml`");
    }
    if input.kind == "ldap" {
        match &input.ldap {
            None => {
                v.check(false, "ldap", "LDAP settings are required for kind `ldap`");
            }
            Some(l) => {
                let url_ok = url::Url::parse(l.url.trim())
                    .is_ok_and(|u| matches!(u.scheme(), "ldap" | "ldaps") && u.host().is_some());
                v.check(
                    url_ok,
                    "ldap.url",
                    "must be ldap://host[:port] or ldaps://host[:port]",
                );
                v.check(
                    !(l.start_tls && l.url.trim().starts_with("ldaps://")),
                    "ldap.start_tls",
                    "ldaps:// is already TLS; StartTLS is for ldap://",
                );
                v.check(
                    l.user_dn_template
                        .as_deref()
                        .is_none_or(|t| t.contains("{username}") && t.contains('=')),
                    "ldap.user_dn_template",
                    "must be a DN containing {username}",
                );
                let search = l.user_dn_template.is_none();
                v.check(
                    !search || (!l.base_dn.trim().is_empty() && l.bind_dn.is_some()),
                    "ldap.base_dn",
                    "search-then-bind needs base_dn and bind_dn (or set user_dn_template)",
                );
                v.check(
                    l.user_filter
                        .as_deref()
                        .is_none_or(|f| f.starts_with('(') && f.contains("{username}")),
                    "ldap.user_filter",
                    "must be a filter containing {username}, e.g. (uid={username})",
                );
                let lookup = l.group_lookup.as_deref().unwrap_or("member_of");
                v.check(
                    lookup == "member_of" || lookup == "search",
                    "ldap.group_lookup",
                    "must be `member_of` or `search`",
                );
                v.check(
                    lookup != "search" || (l.group_base_dn.is_some() && l.bind_dn.is_some()),
                    "ldap.group_base_dn",
                    "group search needs group_base_dn and bind_dn",
                );
                v.check(
                    l.bind_dn.is_none()
                        || has_secret
                        || input
                            .client_secret
                            .as_deref()
                            .is_some_and(|s| !s.is_empty()),
                    "client_secret",
                    "the service account's password is required with bind_dn",
                );
            }
        }
    }
    if input.kind == "oidc" {
        match &input.oidc {
            None => {
                v.check(false, "oidc", "OIDC settings are required for kind `oidc`");
            }
            Some(o) => {
                v.check(
                    url_ok(o.issuer.trim(), allow_private),
                    "oidc.issuer",
                    URL_RULE,
                );
                v.check(
                    !o.client_id.trim().is_empty() && o.client_id.len() <= 500,
                    "oidc.client_id",
                    "must be 1 to 500 characters",
                );
                v.check(
                    o.scopes.len() <= 20
                        && o.scopes
                            .iter()
                            .all(|s| !s.is_empty() && s.len() <= 100 && !s.contains(' ')),
                    "oidc.scopes",
                    "at most 20 scopes, each without spaces",
                );
                for (field, claim) in [
                    ("oidc.subject_claim", &o.subject_claim),
                    ("oidc.username_claim", &o.username_claim),
                    ("oidc.email_claim", &o.email_claim),
                    ("oidc.name_claim", &o.name_claim),
                    ("oidc.groups_claim", &o.groups_claim),
                ] {
                    v.check(
                        claim
                            .as_deref()
                            .is_none_or(|c| !c.is_empty() && c.len() <= 100),
                        field,
                        "must be 1 to 100 characters",
                    );
                }
            }
        }
        v.check(
            has_secret
                || input
                    .client_secret
                    .as_deref()
                    .is_some_and(|s| !s.is_empty()),
            "client_secret",
            "the client secret the IdP issued is required",
        );
    }
    v.check(
        input
            .client_secret
            .as_deref()
            .is_none_or(|s| !s.is_empty() && s.len() <= 1000),
        "client_secret",
        "must be 1 to 1000 characters",
    );
    v.check(
        input.sync.map.len() <= 1000
            && input
                .sync
                .map
                .iter()
                .all(|(k, val)| !k.is_empty() && k.len() <= 500 && slug_ok(val)),
        "sync.map",
        "IdP group names map to Switchyard group names (lower-case slugs)",
    );
    v.check(
        input.sync.required_groups.len() <= 100,
        "sync.required_groups",
        "at most 100 groups",
    );
    v.check(
        input.allowed_email_domains.len() <= 50
            && sso_link::normalize_domains(&input.allowed_email_domains)
                .iter()
                .all(|d| sso_link::domain_ok(d)),
        "allowed_email_domains",
        "at most 50 domain names, e.g. example.com",
    );
    v.finish()
}

fn stored_config(input: &SaveIdentityProvider) -> String {
    let ldap = input.ldap.clone().map(|mut l| {
        l.url = l.url.trim().to_string();
        l
    });
    let mut oidc = input.oidc.clone();
    if let Some(o) = oidc.as_mut() {
        o.issuer = o.issuer.trim().trim_end_matches('/').to_string();
        o.client_id = o.client_id.trim().to_string();
    }
    serde_json::to_string(&StoredConfig {
        oidc,
        ldap,
        saml: input.saml.clone(),
        sync: input.sync.clone(),
        allowed_email_domains: sso_link::normalize_domains(&input.allowed_email_domains),
    })
    .unwrap_or_else(|_| "{}".into())
}

fn audit_summary(input: &SaveIdentityProvider) -> serde_json::Value {
    json!({
        "name": input.name,
        "kind": input.kind,
        "enabled": input.enabled,
        "issuer": input.oidc.as_ref().map(|o| o.issuer.clone()),
        "client_id": input.oidc.as_ref().map(|o| o.client_id.clone()),
        "ldap_url": input.ldap.as_ref().map(|l| l.url.clone()),
        "saml_idp_entity_id": input.saml.as_ref().map(|s| s.idp_entity_id.clone()),
        "saml_idp_certificates": input.saml.as_ref().map(|s| s.idp_certificates.len()),
        "secret_changed": input.client_secret.is_some(),
        "required_groups": input.sync.required_groups,
        "mapped_groups": input.sync.map.len(),
        "by_name": input.sync.by_name,
        "allowed_email_domains": input.allowed_email_domains,
    })
}

pub async fn create_provider(
    store: &Store,
    config: &Config,
    p: &Principal,
    meta: &RequestMeta,
    mut input: SaveIdentityProvider,
) -> ApiResult<IdentityProvider> {
    require(p, Action::ManageDirectory)?;
    input.name = input.name.trim().to_lowercase();
    let allow_private = config.allow_private_idp_addresses;
    if input.kind == "saml" {
        saml::resolve(&mut input, allow_private).await?;
    }
    validate(&input, false, allow_private)?;
    outbound::check_provider(&input, allow_private).await?;
    let now = store.now();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO identity_providers (id, tenant_id, name, display_name, kind, enabled, config, secret, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)")
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&input.name)
        .bind(input.display_name.trim())
        .bind(&input.kind)
        .bind(flag(input.enabled))
        .bind(stored_config(&input))
        .bind(input.client_secret.clone())
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a provider with this name exists in this tenant")))?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "idp.create",
        "idp",
        &id,
        audit_summary(&input),
    )
    .await?;
    tx.commit().await?;
    Ok(provider_row(store, p, &id).await?.public(config))
}

pub async fn update_provider(
    store: &Store,
    config: &Config,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    mut input: SaveIdentityProvider,
) -> ApiResult<IdentityProvider> {
    let existing = provider_row(store, p, id).await?;
    input.name = input.name.trim().to_lowercase();
    let allow_private = config.allow_private_idp_addresses;
    if input.kind == "saml" {
        saml::resolve(&mut input, allow_private).await?;
    }
    validate(&input, existing.secret.is_some(), allow_private)?;
    outbound::check_provider(&input, allow_private).await?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    sqlx::query("UPDATE identity_providers SET name = $1, display_name = $2, kind = $3, enabled = $4, config = $5, secret = COALESCE($6, secret), updated_at = $7 WHERE tenant_id = $8 AND id = $9")
        .bind(&input.name)
        .bind(input.display_name.trim())
        .bind(&input.kind)
        .bind(flag(input.enabled))
        .bind(stored_config(&input))
        .bind(input.client_secret.clone())
        .bind(now)
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a provider with this name exists in this tenant")))?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "idp.update",
        "idp",
        id,
        audit_summary(&input),
    )
    .await?;
    tx.commit().await?;
    Ok(provider_row(store, p, id).await?.public(config))
}

/// Deletes a provider. Users it created stay (an admin may disable them); its links, sign-ins
/// in flight and the memberships it manages go with it.
pub async fn delete_provider(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    let existing = provider_row(store, p, id).await?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    let removed = crate::identity::directory::delete_memberships_from(
        &mut tx,
        p.tenant_id(),
        crate::identity::directory::MemberSource::Provider(id),
    )
    .await?;
    sqlx::query("DELETE FROM identity_providers WHERE tenant_id = $1 AND id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "idp.delete",
        "idp",
        id,
        json!({"name": existing.name, "memberships_removed": removed}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// What the sign-in page of a tenant offers (public: names and buttons, no settings).
///
/// Public, so it must not tell which organizations exist: an unknown slug is answered as a
/// tenant with no identity providers that takes passwords, and such a tenant (known or not) is
/// named by its slug. Only a tenant whose page shows providers — which are public anyway —
/// shows its display name.
pub async fn sign_in_options(store: &Store, tenant_slug: &str) -> ApiResult<SignInOptions> {
    let slug = tenant_slug.trim().to_lowercase();
    let tenant = sqlx::query("SELECT name, password_login FROM tenants WHERE slug = $1")
        .bind(&slug)
        .fetch_optional(&store.pool)
        .await?;
    let rows = sqlx::query(
        "SELECT i.name, i.display_name, i.kind FROM identity_providers i JOIN tenants t ON t.id = i.tenant_id
         WHERE t.slug = $1 AND i.enabled = 1 ORDER BY i.display_name",
    )
    .bind(&slug)
    .fetch_all(&store.pool)
    .await?;
    let providers = rows
        .iter()
        .map(|r| {
            let name: String = r.try_get("name")?;
            let kind: ProviderKind = crate::store::text_enum(r, "kind")?;
            Ok(SignInProvider {
                start_url: if kind == ProviderKind::Ldap {
                    format!("/auth/ldap/{slug}/{name}")
                } else {
                    format!("/auth/sso/{slug}/{name}")
                },
                name,
                display_name: r.try_get("display_name")?,
                kind,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let password_login = match &tenant {
        Some(t) => t.try_get::<i64, _>("password_login")? != 0,
        None => true,
    };
    let tenant_name = match &tenant {
        Some(t) if !providers.is_empty() => t.try_get("name")?,
        _ => slug.clone(),
    };
    Ok(SignInOptions {
        tenant_slug: slug,
        tenant_name,
        password_login,
        providers,
    })
}

pub async fn set_sign_in_settings(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: SignInSettings,
) -> ApiResult<SignInSettings> {
    require(p, Action::ManageDirectory)?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    crate::tenancy::set_password_login(&mut tx, p.tenant_id(), input.password_login).await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "tenant.sign_in_settings",
        "tenant",
        p.tenant_id(),
        json!({"password_login": input.password_login}),
    )
    .await?;
    tx.commit().await?;
    Ok(input)
}
