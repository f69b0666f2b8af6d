//! Resource policies (pools, profiles, policies, queues), jobs and the overviews built on them.

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

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
    pub executor: ExecutorKind,
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
    /// Per-pool quotas beside the overall reservation and limit.
    #[serde(default)]
    pub pools: Vec<PoolQuota>,
    pub updated_at: i64,
}

/// A group's quota on one pool (as node-pool quotas): its use there never exceeds
/// `limit_milli`, and only `reservation_milli` of it there is guaranteed (the rest there is
/// over-quota, and may be reclaimed). On a shared pool it is what the policy reserves there.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct PoolQuota {
    pub pool_id: String,
    /// Filled in on reads; ignored on writes.
    #[serde(default)]
    pub pool_name: String,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 100000000))]
    pub reservation_milli: i64,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 100000000))]
    pub limit_milli: i64,
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
    /// How long its jobs run before they may be preempted; `None`: the server's default.
    pub min_runtime_ms: Option<i64>,
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
    pub state: JobState,
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
    pub stop_reason: Option<StopReason>,
    pub resume_count: i64,
    pub exit_code: Option<i64>,
    pub detail: Option<String>,
    pub abort_kind: Option<AbortKind>,
    pub abort_command: Option<String>,
    pub abort_timeout_ms: i64,
    pub checkpoint_dir: Option<String>,
    pub max_runtime_ms: Option<i64>,
    pub duration_ms: Option<i64>,
    pub submitted_at: i64,
    pub queued_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// In a queue's waiting order (`sort=queue`, `state=queued`, one `queue_id`): the earliest
    /// time the GPUs this job and those ahead of it need are freed by the running jobs' time
    /// limits (on simulated pools, their known run time), as Slurm's expected start; absent
    /// where that cannot be known (a running job without a time limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_start_at: Option<i64>,
    /// The endpoint it serves, if it is a serving job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<Serve>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct JobEvent {
    pub at: i64,
    pub from_state: Option<JobState>,
    pub to_state: JobState,
    pub detail: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct JobDetail {
    pub job: Job,
    pub events: Vec<JobEvent>,
    /// For a queued job: where it stands, and what it waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
}

/// Filters for a list of jobs (newest first). Members see their own jobs; admins see the
/// tenant's.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobQuery {
    pub state: Option<String>,
    pub queue_id: Option<String>,
    pub group_id: Option<String>,
    /// A username.
    pub user: Option<String>,
    /// Part of the job's name.
    pub q: Option<String>,
    /// Only jobs submitted in the last `hour`, `day` or `week`.
    pub within: Option<String>,
    /// `newest` (the default) or `oldest` first.
    pub sort: Option<String>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

/// Why a queued job waits, beyond its wait reason: its place in its queue, its group's use
/// against its reservation, limit and fair share, who borrows on its queue's pools, and the
/// jobs being stopped for it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Waiting {
    /// 1 = the next of its queue to be considered (priority, then submit time).
    pub position: i64,
    /// Jobs waiting in its queue, itself included.
    pub queue_waiting: i64,
    /// The milli-GPUs it waits for.
    pub gpu_milli: i64,
    pub group_name: String,
    /// What its group runs now (milli-GPUs), and of that beyond its reservation.
    pub group_used_milli: i64,
    pub group_over_quota_milli: i64,
    pub group_reservation_milli: i64,
    pub group_limit_milli: i64,
    /// The group's weighted fair share of the GPUs beyond all reservations (what it may
    /// borrow, and reclaim from groups above theirs).
    pub group_fair_share_milli: i64,
    /// Groups running over-quota jobs on its queue's pools (another tenant's shown as
    /// "another organization"), with how much they borrow.
    pub borrowers: Vec<Borrower>,
    /// Jobs being stopped to make room for it (another tenant's shown without a name).
    pub victims: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Borrower {
    pub group_name: String,
    pub gpu_milli: i64,
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
    pub executor: ExecutorKind,
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
    /// The `Idempotency-Key` the submit form sends: it changes once a job of this user is
    /// stored, so a second click on the same form creates nothing.
    pub submit_key: String,
}

/// One whole GPU in milli-GPU, the unit of every GPU amount (quotas, requests, fractions).
pub const WHOLE_GPU_MILLI: i64 = 1000;

/// Milli-GPUs as GPUs for people: `2`, `0.5`, `1.25`.
pub fn format_gpus(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        let s = format!("{:.3}", milli as f64 / 1000.0);
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}
