//! Server functions of the Policy Manager's edit and delete forms: pools, profiles, queues and
//! group policies (with their per-pool quotas). Each works as a plain form post too.

use serde::{Deserialize, Serialize};

use super::*;
#[cfg(feature = "ssr")]
use crate::model::{PoolQuota, PriorityClass, UpdatePool, UpdateProfile, UpdateQueue};

/// One pool's row of a policy's per-pool quotas (posted as `quotas[i][…]`). Both amounts
/// empty: no quota on that pool.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct QuotaRow {
    pub pool_id: String,
    pub reservation_milli: String,
    pub limit_milli: String,
}

/// One priority class of a queue's form (posted as `classes[i][…]`); an empty name is no class.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ClassRow {
    pub name: String,
    pub priority: String,
    /// `yes` or `no`.
    pub preemptible: String,
}

/// The largest amount of one quota: the API's bound.
#[cfg(feature = "ssr")]
const QUOTA_MILLI: std::ops::RangeInclusive<i64> = 0..=100_000_000;

/// A pool of identical nodes, as the create form declares it: the nodes it has keep their
/// names (jobs running there stay placed), new ones are named after the pool. Node fields
/// left as the form showed them leave the nodes as they are.
#[server(prefix = "/_sf", endpoint = "pools/update")]
pub async fn update_pool_form(
    csrf: String,
    id: String,
    name: String,
    executor: String,
    node_count: String,
    gpus_per_node: String,
    gpu_model: String,
    gpu_memory_mb: String,
    gpu_hour_cost_cents: String,
) -> Result<Pool, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let count = form::int_in("nodes", &node_count, 1..=5000)?
            .ok_or_else(|| AppError::field("nodes", "give 1 to 5000 nodes"))?;
        let gpus = form::int_in("gpus_per_node", &gpus_per_node, 0..=16)?.unwrap_or(0);
        let memory = form::int_in("gpu_memory_mb", &gpu_memory_mb, 0..=1_048_576)?.unwrap_or(0);
        let cost = form::int_in("gpu_hour_cost_cents", &gpu_hour_cost_cents, 0..=10_000_000)?;
        let config = c.backend.policy_config(&c.principal).await?;
        let current = config
            .pools
            .into_iter()
            .find(|p| p.id == id)
            .ok_or(AppError::NotFound)?;
        let model = gpu_model.trim().to_string();
        let (gpus, memory) = (gpus as u32, memory as u32);
        let unchanged = current.nodes.len() as i64 == count
            && current.nodes.first().is_some_and(|n| {
                n.gpus == gpus && n.gpu_model == model && n.gpu_memory_mb == memory
            });
        let nodes = (!unchanged).then(|| {
            let prefix = name.trim();
            let mut nodes: Vec<PoolNode> = Vec::with_capacity(count as usize);
            for i in 0..count as usize {
                let mut node = match current.nodes.get(i) {
                    Some(n) => n.clone(),
                    None => {
                        // Named after the pool, unless a node already has that name.
                        let mut k = i + 1;
                        let taken =
                            |s: &str| current.nodes.iter().chain(&nodes).any(|n| n.name == s);
                        while taken(&format!("{prefix}-{k}")) {
                            k += 1;
                        }
                        PoolNode {
                            name: format!("{prefix}-{k}"),
                            gpus: 0,
                            gpu_model: String::new(),
                            gpu_memory_mb: 0,
                            cpu_cores: 0,
                            memory_mb: 0,
                        }
                    }
                };
                node.gpus = gpus;
                node.gpu_model = model.clone();
                node.gpu_memory_mb = memory;
                nodes.push(node);
            }
            nodes
        });
        let input = UpdatePool {
            name: Some(name),
            executor: Some(executor),
            nodes,
            gpu_hour_cost_cents: cost,
        };
        c.backend
            .update_pool(&c.principal, &c.meta, &id, input)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "pools/delete")]
pub async fn delete_pool_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_pool(&c.principal, &c.meta, &id).await
    })
    .await
}

/// A fixed amount, or (empty fixed amount) a dynamic range.
#[server(prefix = "/_sf", endpoint = "profiles/update")]
pub async fn update_profile_form(
    csrf: String,
    id: String,
    name: String,
    gpu_milli: String,
    min_gpu_milli: String,
    max_gpu_milli: String,
) -> Result<Profile, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = UpdateProfile {
            name: Some(name),
            gpu_milli: Some(form::int_in("gpu_milli", &gpu_milli, 0..=16_000)?.unwrap_or(0)),
            min_gpu_milli: form::int_in("min_gpu_milli", &min_gpu_milli, 1..=16_000)?,
            max_gpu_milli: form::int_in("max_gpu_milli", &max_gpu_milli, 1..=16_000)?,
            ..Default::default()
        };
        c.backend
            .update_profile(&c.principal, &c.meta, &id, input)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "profiles/delete")]
pub async fn delete_profile_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_profile(&c.principal, &c.meta, &id).await
    })
    .await
}

/// Pools in order (`pools[i]`, empty ones skipped), classes (`classes[i][…]`), and the
/// minimum runtime in seconds (empty: the server's default).
#[server(prefix = "/_sf", endpoint = "queues/update")]
pub async fn update_queue_form(
    csrf: String,
    id: String,
    name: String,
    profile_id: String,
    #[server(default)] pools: Vec<String>,
    #[server(default)] classes: Vec<ClassRow>,
    over_quota: Option<String>,
    min_runtime_s: String,
) -> Result<Queue, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let min_runtime_ms = form::seconds_as_ms("min_runtime_s", &min_runtime_s, 0..=604_800)?;
        let mut parsed = Vec::new();
        for row in classes.iter().filter(|r| !r.name.trim().is_empty()) {
            let priority = form::int_in("classes", &row.priority, 0..=1000)
                .map_err(|_| {
                    AppError::field(
                        "classes",
                        format!(
                            "class {}: the priority must be a whole number from 0 to 1000",
                            row.name.trim()
                        ),
                    )
                })?
                .unwrap_or(0);
            parsed.push(PriorityClass {
                name: row.name.trim().to_string(),
                priority: priority as i32,
                preemptible: row.preemptible != "no",
            });
        }
        let input = UpdateQueue {
            name: Some(name),
            profile_id: Some(profile_id),
            pools: Some(pools.into_iter().filter(|p| !p.is_empty()).collect()),
            over_quota: Some(over_quota.is_some()),
            classes: Some(parsed),
            min_runtime_ms: Some(min_runtime_ms),
        };
        c.backend
            .update_queue(&c.principal, &c.meta, &id, input)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "queues/delete")]
pub async fn delete_queue_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_queue(&c.principal, &c.meta, &id).await
    })
    .await
}

/// A group's policy with its per-pool quotas (`quotas[i][…]`, one row per pool). The users
/// allowed to exceed the reservation stay as they are.
#[server(prefix = "/_sf", endpoint = "policies/edit")]
pub async fn edit_policy_form(
    csrf: String,
    group_id: String,
    reservation_milli: String,
    limit_milli: String,
    over_quota_weight: String,
    over_quota_allowed: Option<String>,
    #[server(default)] quotas: Vec<QuotaRow>,
) -> Result<Policy, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let required = |field: &str, v: &str| {
            form::int_in(field, v, QUOTA_MILLI)?.ok_or_else(|| AppError::field(field, "is required"))
        };
        let reservation_milli = required("reservation_milli", &reservation_milli)?;
        let limit_milli = required("limit_milli", &limit_milli)?;
        let over_quota_weight =
            form::int_in("over_quota_weight", &over_quota_weight, 0..=1000)?.unwrap_or(1);
        let config = c.backend.policy_config(&c.principal).await?;
        let exceed_users = config
            .policies
            .iter()
            .find(|p| p.group_id == group_id)
            .map(|p| p.exceed_users.clone())
            .unwrap_or_default();
        let pool_name = |id: &str| {
            config
                .pools
                .iter()
                .find(|p| p.id == id)
                .map(|p| p.name.clone())
                .unwrap_or_else(|| id.to_string())
        };
        let mut pools = Vec::new();
        for q in &quotas {
            if q.reservation_milli.trim().is_empty() && q.limit_milli.trim().is_empty() {
                continue;
            }
            let name = pool_name(&q.pool_id);
            let amount = |v: &str, what: &str| {
                form::int_in("pools", v, QUOTA_MILLI).map_err(|_| {
                    AppError::field(
                        "pools",
                        format!("{name}: the {what} must be a whole number of milli-GPUs from 0 to 100000000"),
                    )
                })
            };
            let limit = amount(&q.limit_milli, "limit")?.ok_or_else(|| {
                AppError::field("pools", format!("{name}: give a limit with the reservation"))
            })?;
            pools.push(PoolQuota {
                pool_id: q.pool_id.clone(),
                pool_name: String::new(),
                reservation_milli: amount(&q.reservation_milli, "reservation")?.unwrap_or(0),
                limit_milli: limit,
            });
        }
        let input = SetPolicy {
            group_id,
            reservation_milli,
            limit_milli,
            over_quota_weight,
            over_quota_allowed: over_quota_allowed.is_some(),
            exceed_users,
            pools: Some(pools),
        };
        c.backend.set_policy(&c.principal, &c.meta, input).await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "policies/delete")]
pub async fn delete_policy_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_policy(&c.principal, &c.meta, &id).await
    })
    .await
}
