//! Single sign-on: identity providers and the sign-in page they feed.

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

/// How an OpenID Connect provider is reached and which claims say who the user is.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OidcSettings {
    /// The issuer URL; `/.well-known/openid-configuration` is read from it.
    pub issuer: String,
    pub client_id: String,
    /// Requested scopes besides `openid` (default `profile email groups`).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The claim that identifies the user at the IdP (default `sub`).
    #[serde(default)]
    pub subject_claim: Option<String>,
    /// The claim used as the Switchyard username (default `preferred_username`, else the
    /// part of `email` before `@`).
    #[serde(default)]
    pub username_claim: Option<String>,
    /// Default `email`.
    #[serde(default)]
    pub email_claim: Option<String>,
    /// Default `name`.
    #[serde(default)]
    pub name_claim: Option<String>,
    /// A list of group names or DNs (default `groups`).
    #[serde(default)]
    pub groups_claim: Option<String>,
}

/// How an LDAP directory is reached, how a user is found and bound, and where groups come from.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LdapSettings {
    /// `ldap://host:389` or `ldaps://host:636`.
    pub url: String,
    /// Upgrade an `ldap://` connection with StartTLS before binding.
    #[serde(default)]
    pub start_tls: bool,
    /// Direct bind: the user's DN with `{username}`, e.g. `uid={username},ou=people,dc=corp`.
    /// Without it: search-then-bind with the service account.
    #[serde(default)]
    pub user_dn_template: Option<String>,
    /// Where users are searched (search-then-bind) and groups looked up.
    #[serde(default)]
    pub base_dn: String,
    /// Default `(uid={username})`.
    #[serde(default)]
    pub user_filter: Option<String>,
    /// The service account for search-then-bind and group search; its password is the
    /// provider's `client_secret`.
    #[serde(default)]
    pub bind_dn: Option<String>,
    /// `member_of` (the user's `memberOf` attribute) or `search` (groups whose `member` is
    /// the user, under `group_base_dn`).
    #[serde(default)]
    pub group_lookup: Option<String>,
    #[serde(default)]
    pub group_base_dn: Option<String>,
    /// Defaults: `uid`, `mail`, `cn`.
    #[serde(default)]
    pub username_attr: Option<String>,
    #[serde(default)]
    pub email_attr: Option<String>,
    #[serde(default)]
    pub name_attr: Option<String>,
}

/// A SAML 2.0 identity provider: where it is, which keys sign its assertions, and which
/// attributes say who the user is. Give `idp_metadata_url` or `idp_metadata_xml` and the IdP
/// fields are read from the metadata when the provider is saved; or give the fields yourself.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SamlSettings {
    /// Read at save and again at "test connection".
    #[serde(default)]
    pub idp_metadata_url: Option<String>,
    /// The IdP's metadata document, pasted or uploaded; only its fields below are kept.
    #[serde(default, skip_serializing)]
    pub idp_metadata_xml: Option<String>,
    /// The IdP's entity ID (the `Issuer` of its assertions).
    #[serde(default)]
    pub idp_entity_id: String,
    /// The IdP's single sign-on URL for the HTTP-Redirect binding.
    #[serde(default)]
    pub idp_sso_url: String,
    /// The IdP's signing certificates (PEM or base64 DER); a response or its assertion must
    /// be signed by one of them.
    #[serde(default)]
    pub idp_certificates: Vec<String>,
    /// The attribute used as the Switchyard username (default: the `NameID`).
    #[serde(default)]
    pub username_attribute: Option<String>,
    /// Default `email`.
    #[serde(default)]
    pub email_attribute: Option<String>,
    /// Default `displayName`.
    #[serde(default)]
    pub name_attribute: Option<String>,
    /// A multi-valued attribute of group names or DNs (default `groups`).
    #[serde(default)]
    pub groups_attribute: Option<String>,
}

/// Which IdP groups become which Switchyard groups, and who may sign in at all.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GroupSync {
    /// IdP group → Switchyard group name. IdP groups not listed here map to the Switchyard
    /// group of the same name when `by_name` is on.
    #[serde(default)]
    pub map: std::collections::BTreeMap<String, String>,
    #[serde(default = "yes")]
    pub by_name: bool,
    /// When not empty, sign-in is refused unless the IdP says the user is in one of these
    /// IdP groups.
    #[serde(default)]
    pub required_groups: Vec<String>,
}

impl Default for GroupSync {
    fn default() -> Self {
        GroupSync {
            map: Default::default(),
            by_name: true,
            required_groups: Vec::new(),
        }
    }
}

/// A tenant's identity provider. Secrets are write-only: `has_client_secret` says whether one
/// is stored.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IdentityProvider {
    pub id: String,
    /// In URLs: `/auth/sso/{tenant}/{name}`.
    pub name: String,
    /// On the sign-in button.
    pub display_name: String,
    pub kind: ProviderKind,
    pub enabled: bool,
    pub oidc: Option<OidcSettings>,
    pub ldap: Option<LdapSettings>,
    #[serde(default)]
    pub saml: Option<SamlSettings>,
    pub sync: GroupSync,
    /// E-mail domains in which the IdP's verified address may link a user provisioned before
    /// their first sign-in (by SCIM, or by an admin without a password). Empty: no such linking.
    #[serde(default)]
    pub allowed_email_domains: Vec<String>,
    pub has_client_secret: bool,
    /// Where the IdP must send users back (register it at the IdP): the OIDC redirect URI, or
    /// the SAML assertion consumer service URL. Empty for LDAP.
    pub redirect_uri: String,
    /// SAML: this service provider's entity ID, which is also where its metadata is served.
    #[serde(default)]
    pub sp_entity_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Create or replace an identity provider. On update an absent `client_secret` keeps the
/// stored one.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SaveIdentityProvider {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: String,
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 100, pattern = "\\S")
    )]
    pub display_name: String,
    #[cfg_attr(feature = "ssr", schema(pattern = "^(oidc|saml|ldap)$"))]
    pub kind: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub oidc: Option<OidcSettings>,
    #[serde(default)]
    pub ldap: Option<LdapSettings>,
    #[serde(default)]
    pub saml: Option<SamlSettings>,
    /// OIDC: the client secret; LDAP: the service account's password.
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub sync: GroupSync,
    /// E-mail domains in which the IdP's verified address, equal to the stored one, may link a
    /// user provisioned before their first sign-in (SCIM, or an admin without a password).
    /// Empty: such users are not linked (the sign-in is refused).
    #[serde(default)]
    pub allowed_email_domains: Vec<String>,
}

/// One step of "test connection".
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ConnectionCheck {
    pub step: String,
    pub ok: bool,
    pub detail: String,
}

/// What the sign-in page of a tenant offers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct SignInOptions {
    pub tenant_slug: String,
    pub tenant_name: String,
    pub password_login: bool,
    pub providers: Vec<SignInProvider>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct SignInProvider {
    pub name: String,
    pub display_name: String,
    pub kind: ProviderKind,
    /// OIDC: where the button goes; LDAP: where the username/password form posts.
    pub start_url: String,
}

/// Tenant-wide sign-in settings.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SignInSettings {
    /// Off: only SSO (and platform admins' local accounts, for break-glass) may sign in.
    pub password_login: bool,
}
