//! Single sign-on, protocol-neutral: a tenant's identity providers (REST under `/api/v1/idp`,
//! audited), and finishing a sign-in the protocol module has verified: just-in-time user
//! creation, the "only these IdP groups may sign in" rule, group sync, and the session, all in
//! one transaction with their audit entries.
//!
//! Group sync: the IdP's groups (AD-style DNs reduced to their CN) are mapped to Switchyard
//! groups by the explicit map, else by equal name. A membership the sync added is marked with
//! the provider's id as its `source`; the next sign-in removes those the IdP no longer sends.
//! Memberships an admin added by hand (`local`) are never touched by sync.

pub mod api;
pub mod ldap;
pub mod link;
pub mod oidc;
pub mod outbound;
pub mod saml;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use self::link as sso_link;
use crate::api::error::{unique_violation_as, ApiResult, AppError, Validator};
use crate::api::text::{self, clean_text, UNCLEAN};
use crate::audit::{self, Actor, Record};
use crate::clock::now_ms;
use crate::config::Config;
use crate::identity::directory::slug_ok;
use crate::identity::require;
use crate::identity::tokens;
use crate::store::{flag, new_id, Store, WriteTx};

pub const KINDS: &[&str] = &["oidc", "saml", "ldap"];

/// A provider as stored, with its secret (never leaves the server).
#[derive(Clone, Debug)]
pub struct ProviderRow {
    pub id: String,
    pub tenant_id: String,
    pub tenant_slug: String,
    pub name: String,
    pub display_name: String,
    pub kind: String,
    pub enabled: bool,
    pub oidc: Option<OidcSettings>,
    pub ldap: Option<LdapSettings>,
    pub saml: Option<SamlSettings>,
    pub sync: GroupSync,
    /// E-mail domains in which the IdP's verified address may link a pre-provisioned user.
    pub allowed_email_domains: Vec<String>,
    pub secret: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct StoredConfig {
    #[serde(default)]
    oidc: Option<OidcSettings>,
    #[serde(default)]
    ldap: Option<LdapSettings>,
    #[serde(default)]
    saml: Option<SamlSettings>,
    #[serde(default)]
    sync: GroupSync,
    #[serde(default)]
    allowed_email_domains: Vec<String>,
}

const PROVIDER_SELECT: &str = "SELECT i.id, i.tenant_id, t.slug AS tenant_slug, i.name, i.display_name, i.kind, i.enabled, i.config, i.secret, i.created_at, i.updated_at
    FROM identity_providers i JOIN tenants t ON t.id = i.tenant_id";

fn provider_from_row(r: &AnyRow) -> Result<ProviderRow, sqlx::Error> {
    let config: StoredConfig =
        serde_json::from_str(&r.try_get::<String, _>("config")?).unwrap_or_default();
    Ok(ProviderRow {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        tenant_slug: r.try_get("tenant_slug")?,
        name: r.try_get("name")?,
        display_name: r.try_get("display_name")?,
        kind: r.try_get("kind")?,
        enabled: r.try_get::<i64, _>("enabled")? != 0,
        oidc: config.oidc,
        ldap: config.ldap,
        saml: config.saml,
        sync: config.sync,
        allowed_email_domains: config.allowed_email_domains,
        secret: r.try_get("secret")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// Where an IdP sends users back after an OIDC sign-in (one URL for every tenant: the
/// sign-in in flight says which tenant and provider it belongs to).
pub fn oidc_redirect_uri(config: &Config) -> String {
    format!("{}/auth/oidc/callback", config.base_url())
}

impl ProviderRow {
    pub fn public(&self, config: &Config) -> IdentityProvider {
        IdentityProvider {
            id: self.id.clone(),
            name: self.name.clone(),
            display_name: self.display_name.clone(),
            kind: self.kind.clone(),
            enabled: self.enabled,
            oidc: self.oidc.clone(),
            ldap: self.ldap.clone(),
            saml: self.saml.clone(),
            sync: self.sync.clone(),
            allowed_email_domains: self.allowed_email_domains.clone(),
            has_client_secret: self.secret.is_some(),
            redirect_uri: match self.kind.as_str() {
                "oidc" => oidc_redirect_uri(config),
                "saml" => saml::acs_url(config, &self.tenant_slug, &self.name),
                _ => String::new(),
            },
            sp_entity_id: (self.kind == "saml")
                .then(|| saml::sp_entity_id(config, &self.tenant_slug, &self.name)),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    pub(super) fn actor(&self) -> Actor {
        Actor::system(&format!("idp:{}", self.name))
    }
}

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
    let now = now_ms();
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
    let now = now_ms();
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
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    let removed = sqlx::query("DELETE FROM memberships WHERE tenant_id = $1 AND source = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
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
            let kind: String = r.try_get("kind")?;
            Ok(SignInProvider {
                start_url: if kind == "ldap" {
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
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    sqlx::query("UPDATE tenants SET password_login = $1 WHERE id = $2")
        .bind(flag(input.password_login))
        .bind(p.tenant_id())
        .execute(&mut *tx.tx)
        .await?;
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

// ---- finishing a sign-in ------------------------------------------------------------------

/// Who the IdP says signed in, after the protocol module verified it.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ExternalLogin {
    pub subject: String,
    pub username: String,
    pub email: Option<String>,
    /// The IdP vouches for `email` (OIDC: `email_verified`; SAML and LDAP: the IdP's own
    /// attribute). Only a verified address may link a pre-provisioned user.
    #[serde(default)]
    pub email_verified: bool,
    pub display_name: Option<String>,
    /// As the IdP sent them (DNs allowed).
    pub groups: Vec<String>,
}

/// Why a verified sign-in was still refused; each has a page message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not in any of the provider's required groups.
    NotInRequiredGroup,
    /// A local account already has this username (an admin must resolve it).
    UsernameTaken,
    /// A user with this username is already linked to another IdP identity.
    LinkedElsewhere,
    /// A pre-provisioned user has this username, but the IdP's e-mail address does not link it
    /// (unverified, different, or not in one of the provider's allowed domains).
    EmailMismatch,
    /// The IdP sent no usable username.
    NoUsername,
    /// The linked account is disabled.
    Disabled,
}

impl Refusal {
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NotInRequiredGroup => "sso_denied",
            Refusal::UsernameTaken => "sso_account",
            Refusal::LinkedElsewhere | Refusal::EmailMismatch => "sso_link",
            Refusal::NoUsername => "sso_username",
            Refusal::Disabled => "sso_disabled",
        }
    }

    pub(super) fn reason(&self) -> &'static str {
        match self {
            Refusal::NotInRequiredGroup => "not in a group allowed to sign in",
            Refusal::UsernameTaken => "a local account has this username",
            Refusal::LinkedElsewhere => {
                "the account with this username is linked to another sign-in identity"
            }
            Refusal::EmailMismatch => {
                "the account with this username was provisioned, and the IdP's e-mail address does not link it (verified, equal, in an allowed domain)"
            }
            Refusal::NoUsername => "the IdP sent no usable username",
            Refusal::Disabled => "the account is disabled",
        }
    }
}

/// `CN=ML Research,OU=Groups,DC=corp` → `ML Research`; other names unchanged.
pub fn group_name(raw: &str) -> String {
    let t = raw.trim();
    let looks_like_dn = t.contains('=') && t.contains(',');
    if looks_like_dn || t.to_ascii_lowercase().starts_with("cn=") {
        if let Some(first) = t.split(',').next() {
            if let Some((k, v)) = first.split_once('=') {
                if k.trim().eq_ignore_ascii_case("cn") {
                    return v.trim().to_string();
                }
            }
        }
    }
    t.to_string()
}

/// The Switchyard group names the IdP's groups map to.
pub fn mapped_groups(sync: &GroupSync, idp_groups: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for raw in idp_groups {
        let name = group_name(raw);
        if let Some(target) = sync.map.get(&name).or_else(|| sync.map.get(raw)) {
            out.insert(target.clone());
        } else if sync.by_name {
            out.insert(name.to_lowercase());
        }
    }
    out
}

/// Whether the provider's "required groups" rule lets this user in.
pub fn may_sign_in(sync: &GroupSync, idp_groups: &[String]) -> bool {
    sync.required_groups.is_empty()
        || idp_groups.iter().any(|g| {
            let n = group_name(g);
            sync.required_groups
                .iter()
                .any(|r| r == &n || r == g || r.eq_ignore_ascii_case(&n))
        })
}

/// A username the directory accepts, from what the IdP sent.
pub fn clean_username(raw: &str) -> Option<String> {
    let u: String = raw
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    slug_ok(&u).then_some(u)
}

/// Audits a refused or failed SSO sign-in in the provider's tenant (best effort).
pub async fn audit_failure(
    store: &Store,
    provider: &ProviderRow,
    meta: &RequestMeta,
    who: &str,
    reason: &str,
) {
    let result: Result<(), sqlx::Error> = async {
        let mut tx = store.begin_write().await?;
        audit::append(
            &mut tx,
            now_ms(),
            Record {
                tenant_id: &provider.tenant_id,
                actor: &Actor::system(who),
                action: "auth.login_failed",
                target_kind: "idp",
                target_id: &provider.id,
                summary: json!({"method": provider.kind, "provider": provider.name, "reason": reason}),
                meta,
            },
        )
        .await?;
        tx.commit().await
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "could not audit a failed sign-in");
    }
}

/// The outcome of a verified sign-in: a session, or a refusal (already audited).
pub enum Finished {
    Session { me: Box<Me>, session: String },
    Refused(Refusal),
}

/// Creates or updates the user, syncs groups and opens a session, in one transaction.
pub async fn finish_login(
    store: &Store,
    provider: &ProviderRow,
    login: ExternalLogin,
    meta: &RequestMeta,
    ttl_ms: i64,
) -> ApiResult<Finished> {
    // What the IdP calls the user is shown in pages and the audit log: no control or bidi
    // characters (dropped, not refused: the sign-in is the IdP's to allow).
    let mut login = login;
    login.display_name = login.display_name.map(|d| text::scrub(&d, 100));
    login.email = login
        .email
        .filter(|e| text::clean_text(e) && e.chars().count() <= 254);
    let who = if login.username.is_empty() {
        login.subject.clone()
    } else {
        login.username.clone()
    };
    if !may_sign_in(&provider.sync, &login.groups) {
        audit_failure(
            store,
            provider,
            meta,
            &who,
            Refusal::NotInRequiredGroup.reason(),
        )
        .await;
        return Ok(Finished::Refused(Refusal::NotInRequiredGroup));
    }
    let now = now_ms();
    let mut tx = store.begin_write().await?;
    let linked: Option<String> = sqlx::query_scalar(
        "SELECT user_id FROM external_identities WHERE provider_id = $1 AND subject = $2",
    )
    .bind(&provider.id)
    .bind(&login.subject)
    .fetch_optional(&mut *tx.tx)
    .await?;
    let user_id = match linked {
        Some(id) => {
            sqlx::query("UPDATE external_identities SET last_login_at = $1 WHERE provider_id = $2 AND subject = $3")
                .bind(now)
                .bind(&provider.id)
                .bind(&login.subject)
                .execute(&mut *tx.tx)
                .await?;
            id
        }
        None => match sso_link::link_or_create(&mut tx, provider, &login, now, meta).await? {
            Ok(id) => id,
            Err(refusal) => {
                drop(tx);
                audit_failure(store, provider, meta, &who, refusal.reason()).await;
                return Ok(Finished::Refused(refusal));
            }
        },
    };
    let me = load_me(&mut tx, &provider.tenant_id, &user_id).await?;
    let Some((me, disabled)) = me else {
        return Err(AppError::Internal.into());
    };
    if disabled {
        drop(tx);
        audit_failure(store, provider, meta, &who, Refusal::Disabled.reason()).await;
        return Ok(Finished::Refused(Refusal::Disabled));
    }
    // Keep name and email as the IdP has them.
    if let Some(d) = login
        .display_name
        .as_deref()
        .filter(|d| !d.trim().is_empty())
    {
        sqlx::query("UPDATE users SET display_name = $1 WHERE id = $2")
            .bind(d.chars().take(100).collect::<String>())
            .bind(&user_id)
            .execute(&mut *tx.tx)
            .await?;
    }
    if login.email.is_some() {
        sqlx::query("UPDATE users SET email = $1 WHERE id = $2")
            .bind(login.email.clone())
            .bind(&user_id)
            .execute(&mut *tx.tx)
            .await?;
    }
    let changes = sync_groups(&mut tx, provider, &me, &login.groups, now, meta).await?;
    let (session, _csrf) = tokens::insert_session(&mut tx, &me, now, ttl_ms).await?;
    audit::append(
        &mut tx,
        now,
        Record {
            tenant_id: &me.tenant_id,
            actor: &Actor {
                id: Some(me.user_id.clone()),
                name: me.username.clone(),
            },
            action: "auth.login",
            target_kind: "user",
            target_id: &me.user_id,
            summary: json!({"method": provider.kind, "provider": provider.name, "via": "web", "groups_added": changes.0, "groups_removed": changes.1}),
            meta,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Finished::Session {
        me: Box::new(me),
        session,
    })
}

async fn load_me(
    tx: &mut WriteTx,
    tenant_id: &str,
    user_id: &str,
) -> Result<Option<(Me, bool)>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT u.id AS user_id, u.username, u.display_name, u.email, u.is_tenant_admin, u.is_platform_admin, u.disabled,
            t.id AS tenant_id, t.slug AS tenant_slug, t.name AS tenant_name
         FROM users u JOIN tenants t ON t.id = u.tenant_id WHERE u.tenant_id = $1 AND u.id = $2",
    )
    .bind(tenant_id)
    .bind(user_id)
    .fetch_optional(&mut *tx.tx)
    .await?;
    let Some(r) = row else { return Ok(None) };
    Ok(Some((
        Me {
            user_id: r.try_get("user_id")?,
            username: r.try_get("username")?,
            display_name: r.try_get("display_name")?,
            email: r.try_get("email")?,
            tenant_id: r.try_get("tenant_id")?,
            tenant_slug: r.try_get("tenant_slug")?,
            tenant_name: r.try_get("tenant_name")?,
            is_platform_admin: r.try_get::<i64, _>("is_platform_admin")? != 0,
            is_tenant_admin: r.try_get::<i64, _>("is_tenant_admin")? != 0,
        },
        r.try_get::<i64, _>("disabled")? != 0,
    )))
}

/// Adds the memberships the IdP's groups map to and removes those this provider added before
/// that the IdP no longer sends. Returns (added, removed) group names.
async fn sync_groups(
    tx: &mut WriteTx,
    provider: &ProviderRow,
    me: &Me,
    idp_groups: &[String],
    now: i64,
    meta: &RequestMeta,
) -> Result<(Vec<String>, Vec<String>), sqlx::Error> {
    let wanted = mapped_groups(&provider.sync, idp_groups);
    let groups: BTreeMap<String, String> =
        sqlx::query("SELECT id, name FROM groups WHERE tenant_id = $1")
            .bind(&me.tenant_id)
            .fetch_all(&mut *tx.tx)
            .await?
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<String, _>("name")?,
                    r.try_get::<String, _>("id")?,
                ))
            })
            .collect::<Result<_, sqlx::Error>>()?;
    let current: Vec<(String, String)> = sqlx::query(
        "SELECT group_id, source FROM memberships WHERE tenant_id = $1 AND user_id = $2",
    )
    .bind(&me.tenant_id)
    .bind(&me.user_id)
    .fetch_all(&mut *tx.tx)
    .await?
    .iter()
    .map(|r| Ok((r.try_get("group_id")?, r.try_get("source")?)))
    .collect::<Result<_, sqlx::Error>>()?;
    let name_of: BTreeMap<&String, &String> = groups.iter().map(|(n, id)| (id, n)).collect();
    let wanted_ids: BTreeSet<&String> = wanted.iter().filter_map(|n| groups.get(n)).collect();
    let actor = provider.actor();
    let mut added = Vec::new();
    let mut removed = Vec::new();
    for gid in &wanted_ids {
        if current.iter().any(|(g, _)| g == *gid) {
            continue;
        }
        sqlx::query("INSERT INTO memberships (tenant_id, group_id, user_id, created_at, source) VALUES ($1, $2, $3, $4, $5)")
            .bind(&me.tenant_id)
            .bind(*gid)
            .bind(&me.user_id)
            .bind(now)
            .bind(&provider.id)
            .execute(&mut *tx.tx)
            .await?;
        let name = name_of.get(*gid).map(|s| s.as_str()).unwrap_or_default();
        added.push(name.to_string());
        audit::append(
            tx,
            now,
            Record {
                tenant_id: &me.tenant_id,
                actor: &actor,
                action: "group.member_add",
                target_kind: "group",
                target_id: gid,
                summary: json!({"group": name, "user_id": me.user_id, "username": me.username, "source": "idp"}),
                meta,
            },
        )
        .await?;
    }
    for (gid, source) in &current {
        if source != &provider.id || wanted_ids.contains(gid) {
            continue;
        }
        sqlx::query(
            "DELETE FROM memberships WHERE tenant_id = $1 AND group_id = $2 AND user_id = $3",
        )
        .bind(&me.tenant_id)
        .bind(gid)
        .bind(&me.user_id)
        .execute(&mut *tx.tx)
        .await?;
        let name = name_of.get(gid).map(|s| s.as_str()).unwrap_or_default();
        removed.push(name.to_string());
        audit::append(
            tx,
            now,
            Record {
                tenant_id: &me.tenant_id,
                actor: &actor,
                action: "group.member_remove",
                target_kind: "group",
                target_id: gid,
                summary: json!({"group": name, "user_id": me.user_id, "username": me.username, "source": "idp", "reason": "no longer sent by the IdP"}),
                meta,
            },
        )
        .await?;
    }
    Ok((added, removed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_reduce_to_their_cn() {
        assert_eq!(
            group_name("CN=ML Research,OU=Groups,DC=corp,DC=example"),
            "ML Research"
        );
        assert_eq!(group_name("cn=ml-research"), "ml-research");
        assert_eq!(group_name("ml-research"), "ml-research");
        assert_eq!(group_name("OU=x,DC=y"), "OU=x,DC=y");
    }

    #[test]
    fn groups_map_explicitly_then_by_name() {
        let mut sync = GroupSync {
            by_name: true,
            ..Default::default()
        };
        sync.map.insert("ML Research".into(), "ml-research".into());
        let got = mapped_groups(
            &sync,
            &[
                "CN=ML Research,OU=Groups,DC=corp".into(),
                "Inference".into(),
            ],
        );
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            ["inference", "ml-research"]
        );
        sync.by_name = false;
        let got = mapped_groups(&sync, &["Inference".into()]);
        assert!(
            got.is_empty(),
            "unmapped groups are ignored without by_name"
        );
    }

    #[test]
    fn required_groups_gate_sign_in() {
        let mut sync = GroupSync::default();
        assert!(may_sign_in(&sync, &[]), "no rule: everyone");
        sync.required_groups = vec!["ml-research".into()];
        assert!(!may_sign_in(&sync, &[]));
        assert!(!may_sign_in(&sync, &["other".into()]));
        assert!(may_sign_in(
            &sync,
            &["cn=ml-research,ou=groups,dc=acme,dc=test".into()]
        ));
    }

    #[test]
    fn usernames_are_cleaned_or_refused() {
        assert_eq!(
            clean_username("Bob.Builder").as_deref(),
            Some("bob.builder")
        );
        assert_eq!(clean_username("o'neil").as_deref(), Some("o_neil"));
        assert_eq!(clean_username("  "), None);
    }
}
