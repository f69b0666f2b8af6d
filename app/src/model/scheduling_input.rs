//! What the scheduling API accepts: pools, profiles, group policies and queues created and
//! changed, and jobs submitted (one, or a batch).

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

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
    /// Per-pool quotas (at most 16): replaced by what is sent (`[]` removes them); absent:
    /// kept as they are.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(max_items = 16))]
    pub pools: Option<Vec<PoolQuota>>,
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
    /// How long its jobs run before they may be preempted (0 to 604800000, 7 days); absent:
    /// the server's default. A job preempted before is protected once more per earlier
    /// preemption, up to four times as long.
    #[serde(default)]
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 604800000))]
    pub min_runtime_ms: Option<i64>,
}

/// A change to a pool: the fields sent change, the others stay. Whether it is shared does not
/// change. Nodes that hold running jobs keep their place, name and the GPUs in use.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct UpdatePool {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: Option<String>,
    /// `simulated` or `local`; not while jobs run on the pool.
    #[cfg_attr(feature = "ssr", schema(pattern = "^(simulated|local)$"))]
    pub executor: Option<String>,
    /// The whole new list of nodes.
    #[cfg_attr(feature = "ssr", schema(min_items = 1, max_items = 5000))]
    pub nodes: Option<Vec<PoolNode>>,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 10000000))]
    pub gpu_hour_cost_cents: Option<i64>,
}

/// A change to a profile: the fields sent change, the others stay (checked together as on
/// create). Jobs already submitted keep what they asked for.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct UpdateProfile {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: Option<String>,
    /// Fixed milli-GPUs per job; 0 = dynamic within `[min, max]`.
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 16000))]
    pub gpu_milli: Option<i64>,
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 16000))]
    pub min_gpu_milli: Option<i64>,
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 16000))]
    pub max_gpu_milli: Option<i64>,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 1048576))]
    pub gpu_memory_mb: Option<i64>,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 1024000))]
    pub cpu_milli: Option<i64>,
    #[cfg_attr(feature = "ssr", schema(minimum = 0, maximum = 16777216))]
    pub memory_mb: Option<i64>,
}

/// A change to a queue: the fields sent change, the others stay. Its group policy does not
/// change (its jobs count against their group): make a new queue for another group.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct UpdateQueue {
    #[cfg_attr(feature = "ssr", schema(pattern = "^[a-z0-9][a-z0-9._-]{0,62}$"))]
    pub name: Option<String>,
    pub profile_id: Option<String>,
    /// Pool ids in order; the later ones are spillover.
    #[cfg_attr(feature = "ssr", schema(min_items = 1, max_items = 8))]
    pub pools: Option<Vec<String>>,
    pub over_quota: Option<bool>,
    #[cfg_attr(feature = "ssr", schema(min_items = 1, max_items = 8))]
    pub classes: Option<Vec<PriorityClass>>,
    /// 0 to 604800000 (7 days); `null`: back to the server's default; absent: unchanged.
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "ssr",
        schema(value_type = Option<i64>, minimum = 0, maximum = 604800000)
    )]
    pub min_runtime_ms: Option<Option<i64>>,
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
    /// Serve an endpoint (you need `manage` on it): the job becomes one of its instances.
    #[serde(default)]
    pub serve: Option<Serve>,
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
