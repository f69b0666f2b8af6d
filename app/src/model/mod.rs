//! Types shared by the REST API, the server functions and the pages.
//!
//! Times are integer milliseconds since the Unix epoch; ids are text (UUIDv7, so they sort by
//! creation time).

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

mod access;
mod gateway;
mod gateway_tcp;
mod history;
mod scheduling;
mod scheduling_input;
mod sso;
mod states;

pub use access::*;
pub use gateway::*;
pub use gateway_tcp::*;
pub use history::*;
pub use scheduling::*;
pub use scheduling_input::*;
pub use sso::*;
pub use states::*;

/// A field that may be absent (`None`), `null` (`Some(None)`) or a value.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// `#[serde(default = "yes")]`.
pub(crate) fn yes() -> bool {
    true
}

/// `#[serde(default = "one")]`.
pub(crate) fn one() -> i64 {
    1
}

/// The signed-in user as the API and the pages see them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Me {
    pub user_id: String,
    pub username: String,
    pub display_name: String,
    pub email: Option<String>,
    pub tenant_id: String,
    pub tenant_slug: String,
    pub tenant_name: String,
    /// Cross-tenant operator of the platform.
    pub is_platform_admin: bool,
    /// Administrator of their own tenant.
    pub is_tenant_admin: bool,
}

/// How a request authenticated. Resolved per request from the store, so a revoked token, an ended
/// session or a disabled user stops working on the very next request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Browser session cookie; state-changing requests must carry this CSRF token.
    Session { session_id: String, csrf: String },
    /// `Authorization: Bearer` API token.
    Token { token_id: String },
}

/// The authenticated caller. The tenant of every tenant-scoped operation comes from here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub me: Me,
    pub auth: Auth,
}

impl Principal {
    pub fn tenant_id(&self) -> &str {
        &self.me.tenant_id
    }
    pub fn user_id(&self) -> &str {
        &self.me.user_id
    }
}

/// Where a request came from, for the audit log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestMeta {
    pub source_ip: String,
    pub request_id: String,
}

/// What the pages know about the browser session.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SessionInfo {
    pub me: Me,
    pub csrf: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct User {
    pub id: String,
    pub tenant_id: String,
    pub username: String,
    pub display_name: String,
    pub email: Option<String>,
    pub is_tenant_admin: bool,
    pub is_platform_admin: bool,
    pub disabled: bool,
    /// Whether the account can sign in with a local password.
    pub has_password: bool,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Group {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    pub description: String,
    pub member_count: i64,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Member {
    pub user_id: String,
    pub username: String,
    pub display_name: String,
    pub added_at: i64,
}

/// A group with its members and the users that could still be added (for the page).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupDetail {
    pub group: Group,
    pub members: Vec<Member>,
    pub candidates: Vec<User>,
    /// What the group's members may do, besides its queues.
    pub rules: Vec<AccessRule>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Project {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    pub description: String,
    /// Projects form a tree; access granted on a project is inherited by its subtree.
    pub parent_id: Option<String>,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ApiToken {
    pub id: String,
    pub user_id: String,
    pub name: String,
    /// The first characters of the secret, to recognise it; the secret itself is never stored.
    pub prefix: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

/// A freshly created token: the secret is shown this once.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct NewToken {
    pub token: String,
    pub info: ApiToken,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Tenant {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub created_at: i64,
}

/// A tenant as the Platform Management Center sees it: counts, not contents.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TenantSummary {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub users: i64,
    pub groups: i64,
    pub projects: i64,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AuditEntry {
    pub id: i64,
    pub tenant_id: String,
    /// The hash chain it belongs to.
    pub chain: AuditChain,
    /// Position in its chain, from 1.
    pub seq: i64,
    pub at: i64,
    pub actor_id: Option<String>,
    pub actor_name: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    /// What changed, as a JSON object.
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub summary: serde_json::Value,
    pub source_ip: String,
    pub request_id: String,
    pub prev_hash: String,
    pub hash: String,
}

/// Filters for the audit log. `from` and `to` are inclusive bounds in epoch milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AuditFilter {
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub actor: Option<String>,
    pub action: Option<String>,
    pub target: Option<String>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

/// One page of a list, with the cursor for the next one.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

// ---- inputs -------------------------------------------------------------------------------

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub username: String,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_length = 100))]
    pub display_name: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    /// Local password (at least 12 characters). Omit for SSO-only accounts.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(min_length = 12))]
    pub password: Option<String>,
    #[serde(default)]
    pub is_tenant_admin: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateUser {
    #[serde(default)]
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 100, pattern = "\\S")
    )]
    pub display_name: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(min_length = 12))]
    pub password: Option<String>,
    #[serde(default)]
    pub is_tenant_admin: Option<bool>,
    #[serde(default)]
    pub disabled: Option<bool>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateGroup {
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 64, pattern = "^[^/\\n]*[^/\\s][^/\\n]*$")
    )]
    pub name: String,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_length = 500))]
    pub description: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateGroup {
    #[serde(default)]
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 64, pattern = "^[^/\\n]*[^/\\s][^/\\n]*$")
    )]
    pub name: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_length = 500))]
    pub description: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    pub user_id: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateProject {
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 64, pattern = "^[^/\\n]*[^/\\s][^/\\n]*$")
    )]
    pub name: String,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_length = 500))]
    pub description: Option<String>,
    #[serde(default)]
    pub parent_id: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateProject {
    #[serde(default)]
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 64, pattern = "^[^/\\n]*[^/\\s][^/\\n]*$")
    )]
    pub name: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_length = 500))]
    pub description: Option<String>,
    /// Moves the project under another one of the tenant; `null`: to the top; absent: where
    /// it is. A project cannot move inside itself or one of its sub-projects.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<String>))]
    pub parent_id: Option<Option<String>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 64, pattern = "\\S")
    )]
    pub name: String,
    /// Lifetime in days, 1 to 365; 30 when omitted.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 365))]
    pub expires_in_days: Option<i64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    /// Lower-case letters, digits and dashes; used in URLs and at login.
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub slug: String,
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 100, pattern = "\\S")
    )]
    pub name: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    /// The tenant's slug.
    pub tenant: String,
    pub username: String,
    pub password: String,
    /// Name for the issued token; "login" when omitted.
    #[serde(default)]
    pub token_name: Option<String>,
    /// Lifetime of the issued token in days (1 to 365); 1 when omitted.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 365))]
    pub expires_in_days: Option<i64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct LoginResponse {
    pub token: String,
    pub token_id: String,
    pub expires_at: i64,
    pub me: Me,
}
