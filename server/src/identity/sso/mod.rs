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
mod finish;
pub mod ldap;
pub mod link;
pub mod oidc;
pub mod outbound;
mod providers;
pub mod requests;
pub mod saml;

use sqlx::any::AnyRow;
use sqlx::Row;

use app::model::*;

use crate::audit::Actor;
use crate::config::Config;

pub use self::finish::*;
pub use self::providers::*;

pub const KINDS: &[&str] = &["oidc", "saml", "ldap"];

/// A provider as stored, with its secret (never leaves the server).
#[derive(Clone, Debug)]
pub struct ProviderRow {
    pub id: String,
    pub tenant_id: String,
    pub tenant_slug: String,
    pub name: String,
    pub display_name: String,
    pub kind: ProviderKind,
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
        kind: crate::store::text_enum(r, "kind")?,
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
            kind: self.kind,
            enabled: self.enabled,
            oidc: self.oidc.clone(),
            ldap: self.ldap.clone(),
            saml: self.saml.clone(),
            sync: self.sync.clone(),
            allowed_email_domains: self.allowed_email_domains.clone(),
            has_client_secret: self.secret.is_some(),
            redirect_uri: match self.kind {
                ProviderKind::Oidc => oidc_redirect_uri(config),
                ProviderKind::Saml => saml::acs_url(config, &self.tenant_slug, &self.name),
                ProviderKind::Ldap => String::new(),
            },
            sp_entity_id: (self.kind == ProviderKind::Saml)
                .then(|| saml::sp_entity_id(config, &self.tenant_slug, &self.name)),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    pub(super) fn actor(&self) -> Actor {
        Actor::system(&format!("idp:{}", self.name))
    }
}
