//! Types shared by the REST API, the server functions and the pages.
//!
//! Times are integer milliseconds since the Unix epoch; ids are text (UUIDv7, so they sort by
//! creation time).

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

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
    /// Position in the tenant's hash chain, from 1.
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

// ---- resource policies and jobs -------------------------------------------------------------
// GPU amounts are integer milli-GPUs everywhere (1000 = one GPU, 125 = one eighth).

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct PoolNode {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: String,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 16))]
    pub gpus: u32,
    #[cfg_attr(feature = "ssr", schema(max_length = 64))]
    pub gpu_model: String,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 1048576))]
    pub gpu_memory_mb: u32,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 4096))]
    pub cpu_cores: u32,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 16777216))]
    pub memory_mb: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Pool {
    pub id: String,
    pub name: String,
    /// `None`: shared by every tenant; otherwise dedicated to this tenant.
    pub owner_tenant_id: Option<String>,
    /// `simulated` (declared nodes, jobs run for their declared duration) or `local`
    /// (real processes on the control plane's host, no GPUs).
    pub executor: String,
    pub nodes: Vec<PoolNode>,
    pub gpu_hour_cost_cents: i64,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Profile {
    pub id: String,
    pub name: String,
    /// Fixed amount per job; 0 = dynamic: the job's request within `[min, max]`.
    pub gpu_milli: i64,
    pub min_gpu_milli: i64,
    pub max_gpu_milli: i64,
    /// GPU memory per job for fractions (MiB); 0 = proportional to the fraction.
    pub gpu_memory_mb: i64,
    pub cpu_milli: i64,
    pub memory_mb: i64,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Policy {
    pub id: String,
    pub group_id: String,
    pub group_name: String,
    /// Guaranteed milli-GPUs; never reclaimed while used.
    pub reservation_milli: i64,
    /// Cap in milli-GPUs, never exceeded.
    pub limit_milli: i64,
    /// Share of idle capacity relative to other borrowing groups.
    pub over_quota_weight: i64,
    pub over_quota_allowed: bool,
    /// Users that may exceed the reservation; empty = every member.
    pub exceed_users: Vec<String>,
    pub updated_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct PriorityClass {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: String,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 1000))]
    pub priority: i32,
    /// Non-preemptible classes run only on reserved capacity.
    pub preemptible: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Queue {
    pub id: String,
    pub name: String,
    pub policy_id: String,
    pub group_id: String,
    pub group_name: String,
    pub profile_id: String,
    pub profile_name: String,
    /// Pool ids in order; the later ones are spillover.
    pub pools: Vec<String>,
    pub over_quota: bool,
    pub classes: Vec<PriorityClass>,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Job {
    pub id: String,
    pub queue_id: String,
    pub queue_name: String,
    pub group_id: String,
    pub user_id: String,
    pub username: String,
    pub name: String,
    pub command: String,
    pub image: Option<String>,
    pub env: std::collections::BTreeMap<String, String>,
    pub gpu_milli: i64,
    pub priority_class: String,
    pub preemptible: bool,
    /// queued, admitted, starting, running, preempting, preempted, succeeded, failed, aborted, lost
    pub state: String,
    /// For a waiting job: why, in plain words.
    pub wait_reason: Option<String>,
    pub wait_code: Option<String>,
    pub pool_id: Option<String>,
    pub node_name: Option<String>,
    /// (device index, milli-GPUs) on its node.
    #[cfg_attr(feature = "ssr", schema(schema_with = crate::schema::slices))]
    pub slices: Vec<(u32, u32)>,
    pub over_quota: bool,
    /// `abort`, `preempt` or `max_runtime` while a stop is in progress or after it.
    pub stop_reason: Option<String>,
    pub resume_count: i64,
    pub exit_code: Option<i64>,
    pub detail: Option<String>,
    pub abort_kind: Option<String>,
    pub abort_command: Option<String>,
    pub abort_timeout_ms: i64,
    pub checkpoint_dir: Option<String>,
    pub max_runtime_ms: Option<i64>,
    pub duration_ms: Option<i64>,
    pub submitted_at: i64,
    pub queued_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct JobEvent {
    pub at: i64,
    pub from_state: Option<String>,
    pub to_state: String,
    pub detail: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct JobDetail {
    pub job: Job,
    pub events: Vec<JobEvent>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Preemption {
    pub at: i64,
    pub pool_name: String,
    pub victim_job_id: String,
    /// The victim's group, or "another tenant" when it is not the viewer's.
    pub victim_group: String,
    pub for_job_id: String,
    pub for_group: String,
    pub gpu_milli: i64,
    pub reason: String,
}

/// One pool's capacity as a tenant sees it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct PoolUsage {
    pub pool_id: String,
    pub name: String,
    pub shared: bool,
    pub executor: String,
    pub total_milli: i64,
    /// In use within reservations (all tenants).
    pub in_quota_milli: i64,
    /// In use beyond reservations, reclaimable (all tenants).
    pub over_quota_milli: i64,
    pub idle_milli: i64,
    /// Reservations of this tenant's groups whose queues start at this pool.
    pub reserved_milli: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct GroupUsage {
    pub group_id: String,
    pub group_name: String,
    pub reservation_milli: i64,
    pub limit_milli: i64,
    pub over_quota_weight: i64,
    pub over_quota_allowed: bool,
    pub used_milli: i64,
    pub over_quota_milli: i64,
    pub running: i64,
    pub waiting: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct QueueStats {
    pub queue_id: String,
    pub name: String,
    pub group_name: String,
    pub pools: Vec<String>,
    pub running: i64,
    pub waiting: i64,
    /// Mean time from queued to started over the last hour's starts, ms.
    pub avg_wait_ms: Option<i64>,
}

/// Everything the Policy Manager shows.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct PolicyOverview {
    pub pools: Vec<PoolUsage>,
    pub groups: Vec<GroupUsage>,
    pub queues: Vec<QueueStats>,
    pub preemptions: Vec<Preemption>,
}

/// Lists for the Policy Manager's editing forms.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PolicyConfig {
    pub pools: Vec<Pool>,
    pub profiles: Vec<Profile>,
    pub policies: Vec<Policy>,
    pub queues: Vec<Queue>,
    pub groups: Vec<Group>,
}

/// The builder portal: the queues I may submit to, my jobs, my groups' quota.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PortalOverview {
    pub queues: Vec<Queue>,
    pub jobs: Vec<Job>,
    pub groups: Vec<GroupUsage>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreatePool {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: String,
    /// `simulated` or `local`.
    #[cfg_attr(feature = "ssr", schema(pattern = "^(simulated|local)$"))]
    pub executor: String,
    #[cfg_attr(feature = "ssr", schema(min_items = 1, max_items = 5000))]
    pub nodes: Vec<PoolNode>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 10000000))]
    pub gpu_hour_cost_cents: i64,
    /// Shared by every tenant (platform admins only); otherwise dedicated to the caller's tenant.
    #[serde(default)]
    pub shared: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateProfile {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: String,
    /// Fixed milli-GPUs per job; 0 or absent = dynamic within `[min, max]`.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 16000))]
    pub gpu_milli: i64,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 16000))]
    pub min_gpu_milli: Option<i64>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 16000))]
    pub max_gpu_milli: Option<i64>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 1048576))]
    pub gpu_memory_mb: i64,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 1024000))]
    pub cpu_milli: i64,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 16777216))]
    pub memory_mb: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetPolicy {
    pub group_id: String,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 100000000))]
    pub reservation_milli: i64,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 100000000))]
    pub limit_milli: i64,
    #[serde(default = "one")]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 1000))]
    pub over_quota_weight: i64,
    #[serde(default = "yes")]
    pub over_quota_allowed: bool,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_items = 1000))]
    pub exceed_users: Vec<String>,
}

fn one() -> i64 {
    1
}
fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateQueue {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: String,
    pub policy_id: String,
    pub profile_id: String,
    /// Pool ids in order; the later ones are spillover.
    #[cfg_attr(feature = "ssr", schema(min_items = 1, max_items = 8))]
    pub pools: Vec<String>,
    #[serde(default = "yes")]
    pub over_quota: bool,
    /// Defaults to high (100, non-preemptible), normal (50) and low (10).
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(min_items = 1, max_items = 8))]
    pub classes: Option<Vec<PriorityClass>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AbortSpec {
    /// `bash` or `python`.
    #[cfg_attr(feature = "ssr", schema(pattern = "^(bash|python)$"))]
    pub kind: String,
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 10000, pattern = "\\S")
    )]
    pub command: String,
    /// 1 to 600000 ms (default 30000).
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 600000))]
    pub timeout_ms: Option<i64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    pub queue_id: String,
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 100, pattern = "\\S")
    )]
    pub name: String,
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 10000, pattern = "\\S")
    )]
    pub command: String,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_length = 500))]
    pub image: Option<String>,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Requested milli-GPUs; required when the queue's profile is dynamic, else must match.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 16000))]
    pub gpu_milli: Option<i64>,
    /// A class of the queue (default `normal`, or the queue's first class).
    #[serde(default)]
    pub priority_class: Option<String>,
    #[serde(default)]
    pub abort: Option<AbortSpec>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(min_length = 1, max_length = 1000))]
    pub checkpoint_dir: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 1000, maximum = 2592000000i64))]
    pub max_runtime_ms: Option<i64>,
    /// Simulated pools: how long the job runs (default 60000 ms).
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 2592000000i64))]
    pub duration_ms: Option<i64>,
}

/// Many jobs at once (a job array): all of them are stored, or none (then every field error
/// names its job, e.g. `jobs[3].gpu_milli`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SubmitJobs {
    /// 1 to 1000 jobs, to one queue or several.
    #[cfg_attr(feature = "ssr", schema(min_items = 1, max_items = 1000))]
    pub jobs: Vec<SubmitJob>,
}

/// The jobs of a batch, in the order they were sent.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct SubmittedJobs {
    pub jobs: Vec<Job>,
}

/// Milli-GPUs as GPUs for people: `2`, `0.5`, `1.25`.
pub fn format_gpus(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        let s = format!("{:.3}", milli as f64 / 1000.0);
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

// ---- single sign-on -----------------------------------------------------------------------

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
    /// `oidc`, `saml` or `ldap`.
    pub kind: String,
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
    pub kind: String,
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

// ---- access rules, models and datasets ----------------------------------------------------

pub use crate::access::{Permission, ResourceKind};

/// group → permission on resources of a kind: one resource, a project subtree, or all.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AccessRule {
    pub id: String,
    pub group_id: String,
    pub group_name: String,
    pub permission: Permission,
    pub resource_kind: ResourceKind,
    /// One resource; with `project_id` also absent: every resource of the kind.
    pub resource_id: Option<String>,
    /// A project and every project below it.
    pub project_id: Option<String>,
    pub created_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateAccessRule {
    pub group_id: String,
    pub permission: Permission,
    pub resource_kind: ResourceKind,
    #[serde(default)]
    pub resource_id: Option<String>,
    #[serde(default)]
    pub project_id: Option<String>,
}

/// A registered model or dataset.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Asset {
    pub id: String,
    /// `model` or `dataset`.
    pub kind: ResourceKind,
    pub project_id: String,
    pub name: String,
    /// Where it lives (`s3://…`, `hf://…`, a path).
    pub location_uri: String,
    pub metadata: std::collections::BTreeMap<String, String>,
    pub owner_id: Option<String>,
    /// What the caller may do with it.
    pub permission: Permission,
    pub created_at: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateAsset {
    pub project_id: String,
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 200, pattern = "\\S")
    )]
    pub name: String,
    pub location_uri: String,
    #[serde(default)]
    pub metadata: std::collections::BTreeMap<String, String>,
}

/// One thing a user may do, and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Grant {
    pub resource_kind: ResourceKind,
    pub resource_id: String,
    pub resource_name: String,
    pub permission: Permission,
    /// Group names, `owner` or `tenant admin`.
    pub via: Vec<String>,
}

/// "What can this user do": their groups and every resource they reach.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct UserAccess {
    pub user_id: String,
    pub username: String,
    pub tenant_admin: bool,
    pub groups: Vec<String>,
    pub grants: Vec<Grant>,
}
