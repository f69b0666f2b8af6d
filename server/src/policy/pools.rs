//! Pools: capacity (nodes with GPUs), shared (platform admins) or dedicated to one tenant. Owns `pools`.

use super::*;
use crate::http::text::{clean_text, UNCLEAN};
use crate::store::in_use;

const POOL_COLUMNS: &str =
    "id, owner_tenant_id, name, executor, nodes, gpu_hour_cost_cents, created_at";

pub(crate) fn pool_from_row(r: &AnyRow) -> Result<Pool, sqlx::Error> {
    Ok(Pool {
        id: r.try_get("id")?,
        owner_tenant_id: r.try_get("owner_tenant_id")?,
        name: r.try_get("name")?,
        executor: crate::store::text_enum(r, "executor")?,
        nodes: parse_json(&r.try_get::<String, _>("nodes")?)?,
        gpu_hour_cost_cents: r.try_get("gpu_hour_cost_cents")?,
        created_at: r.try_get("created_at")?,
    })
}

/// The pools a tenant may use: shared ones and its own.
pub async fn list_pools(store: &Store, p: &Principal) -> ApiResult<Vec<Pool>> {
    require(p, Action::SubmitJobs)?;
    let rows = sqlx::query(&format!(
        "SELECT {POOL_COLUMNS} FROM pools WHERE owner_tenant_id IS NULL OR owner_tenant_id = $1 ORDER BY name"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows.iter().map(pool_from_row).collect::<Result<_, _>>()?)
}

/// A pool's shape as far as "can this job ever fit on one node" needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolFit {
    /// The most GPUs on one node.
    pub max_gpus: i64,
    /// The largest GPU memory among nodes that have GPUs.
    pub max_gpu_memory_mb: i64,
    /// The distinct node shapes, read only when a job asks for CPU or host memory (a job must
    /// find GPUs, CPU and memory on one node together).
    pub shapes: Option<Vec<PoolNode>>,
}

impl PoolFit {
    pub fn of(nodes: &[PoolNode]) -> PoolFit {
        let with_gpus = || nodes.iter().filter(|n| n.gpus > 0);
        PoolFit {
            max_gpus: with_gpus().map(|n| n.gpus as i64).max().unwrap_or(0),
            max_gpu_memory_mb: with_gpus()
                .map(|n| n.gpu_memory_mb as i64)
                .max()
                .unwrap_or(0),
            shapes: None,
        }
    }

    /// Whether a job of `gpu_milli` (with a per-device memory floor for fractions, and the
    /// CPU and host memory of its profile) fits on one node. Gangs across nodes are not
    /// scheduled. A node that declares no CPU or memory (0) is not checked for it.
    pub fn fits(&self, gpu_milli: i64, gpu_memory_mb: i64, cpu_milli: i64, memory_mb: i64) -> bool {
        let gpus_fit = |gpus: i64, mem: i64| {
            if gpu_milli < 1000 {
                gpus > 0 && (gpu_memory_mb == 0 || gpu_memory_mb <= mem)
            } else {
                gpu_milli <= gpus * 1000
            }
        };
        match &self.shapes {
            Some(shapes) if cpu_milli > 0 || memory_mb > 0 => shapes.iter().any(|n| {
                gpus_fit(n.gpus as i64, n.gpu_memory_mb as i64)
                    && (n.cpu_cores == 0 || cpu_milli <= n.cpu_cores as i64 * 1000)
                    && (n.memory_mb == 0 || memory_mb as u64 <= n.memory_mb)
            }),
            _ => gpus_fit(self.max_gpus, self.max_gpu_memory_mb),
        }
    }
}

/// The shapes of those of `ids` the tenant may use (from the row; the node list only when
/// `host` asks for CPU or memory to be checked too).
pub async fn pool_fits(
    store: &Store,
    p: &Principal,
    ids: &[String],
    host: bool,
) -> ApiResult<Vec<PoolFit>> {
    let mut out = Vec::with_capacity(ids.len());
    let nodes = if host { "nodes" } else { "NULL AS nodes" };
    for id in ids {
        let row = sqlx::query(&format!(
            "SELECT fit_gpus, fit_gpu_memory_mb, {nodes} FROM pools WHERE id = $1 AND (owner_tenant_id IS NULL OR owner_tenant_id = $2)"
        ))
        .bind(id)
        .bind(p.tenant_id())
        .fetch_optional(&store.pool)
        .await?;
        if let Some(r) = row {
            let shapes = match r.try_get::<Option<String>, _>("nodes")? {
                Some(json) => {
                    let mut all: Vec<PoolNode> = serde_json::from_str(&json).unwrap_or_default();
                    for n in &mut all {
                        n.name.clear();
                    }
                    all.sort_by_key(|n| (n.gpus, n.gpu_memory_mb, n.cpu_cores, n.memory_mb));
                    all.dedup();
                    Some(all)
                }
                None => None,
            };
            out.push(PoolFit {
                max_gpus: r.try_get("fit_gpus")?,
                max_gpu_memory_mb: r.try_get("fit_gpu_memory_mb")?,
                shapes,
            });
        }
    }
    Ok(out)
}

pub async fn get_pool(store: &Store, p: &Principal, id: &str) -> ApiResult<Pool> {
    require(p, Action::SubmitJobs)?;
    let row = sqlx::query(&format!(
        "SELECT {POOL_COLUMNS} FROM pools WHERE id = $1 AND (owner_tenant_id IS NULL OR owner_tenant_id = $2)"
    ))
    .bind(id)
    .bind(p.tenant_id())
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(pool_from_row(&row)?)
}

/// The pool's fields, each error at its own field. `name`: the pool's name as it is stored.
fn check_pool(input: &CreatePool, name: &str) -> Result<(), AppError> {
    let mut v = Validator::default();
    v.check(!name.is_empty(), "name", "is required");
    v.check(
        name.is_empty() || slug_ok(name),
        "name",
        "use 1 to 63 lower-case letters, digits, '-', '_' or '.'",
    );
    v.check(
        ExecutorKind::parse(&input.executor).is_some(),
        "executor",
        "must be `simulated` or `local`",
    );
    v.check(
        !input.nodes.is_empty(),
        "nodes",
        "declare at least one node",
    );
    v.check(
        input.nodes.len() <= MAX_NODES,
        "nodes",
        "at most 5000 nodes per pool",
    );
    v.check(
        (0..=10_000_000).contains(&input.gpu_hour_cost_cents),
        "gpu_hour_cost_cents",
        "must be between 0 and 10000000",
    );
    let mut names = std::collections::HashSet::new();
    // The page's form names the nodes after the pool (`{name}-1`, `{name}-2`…): such names
    // fail for the pool name's own fault, which is said at the name, not at the nodes.
    let named_after_pool = format!("{}-", input.name.trim());
    for n in &input.nodes {
        if !slug_ok(&n.name) {
            if !n.name.starts_with(&named_after_pool) {
                v.check(
                    false,
                    "nodes",
                    "node names use lower-case letters, digits, '-', '_' or '.'",
                );
            } else if slug_ok(name) {
                let message = if slug_ok(&n.name.to_lowercase()) {
                    // Valid once lower-cased, but the nodes keep the name as typed.
                    "use lower-case letters: the nodes are named after the pool"
                } else {
                    "is too long: the nodes are named after the pool, and a node name has at most 63 characters"
                };
                v.check(false, "name", message);
            }
            break;
        }
        if !names.insert(n.name.as_str()) {
            v.check(false, "nodes", "node names must be unique within the pool");
            break;
        }
        if n.gpus > MAX_GPUS_PER_NODE {
            v.check(false, "nodes", "at most 16 GPUs per node");
            break;
        }
        if n.gpu_memory_mb > 1_048_576 || (n.gpus > 0 && n.gpu_memory_mb < 1024) {
            v.check(
                false,
                "nodes",
                "gpu_memory_mb must be at most 1048576, and at least 1024 on a node with GPUs",
            );
            break;
        }
        if n.gpu_model.chars().count() > 64 {
            v.check(false, "nodes", "gpu_model must be at most 64 characters");
            break;
        }
        if n.cpu_cores > 4096 || n.memory_mb > 16_777_216 {
            v.check(
                false,
                "nodes",
                "cpu_cores must be at most 4096 and memory_mb at most 16777216",
            );
            break;
        }
        if !clean_text(&n.gpu_model) {
            v.check(false, "nodes", &format!("gpu_model {UNCLEAN}"));
            break;
        }
    }
    v.finish()
}

/// Declares a pool. `local_pools_allowed`: the server's `allow_local_pools` setting; a pool
/// whose jobs run as processes on the server's host is a platform admin's decision alone.
pub async fn create_pool(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreatePool,
    local_pools_allowed: bool,
) -> ApiResult<Pool> {
    require(p, Action::ManagePolicy)?;
    if input.shared {
        require(p, Action::ManageSharedPools)?;
    }
    if input.executor == ExecutorKind::Local.as_str() {
        require(p, Action::ManageSharedPools)?;
        if !local_pools_allowed {
            return Err(AppError::field(
                "executor",
                "local pools are turned off on this server (setting allow_local_pools)",
            )
            .into());
        }
    }
    let name = input.name.trim().to_lowercase();
    check_pool(&input, &name)?;
    let pool = Pool {
        id: new_id(),
        name,
        owner_tenant_id: (!input.shared).then(|| p.tenant_id().to_string()),
        executor: ExecutorKind::parse(&input.executor).unwrap_or(ExecutorKind::Simulated),
        nodes: input.nodes,
        gpu_hour_cost_cents: input.gpu_hour_cost_cents,
        created_at: store.now(),
    };
    let gpus: u32 = pool.nodes.iter().map(|n| n.gpus).sum();
    let fit = PoolFit::of(&pool.nodes);
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    sqlx::query("INSERT INTO pools (id, owner_tenant_id, name, executor, nodes, gpu_hour_cost_cents, created_at, fit_gpus, fit_gpu_memory_mb) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)")
        .bind(&pool.id)
        .bind(pool.owner_tenant_id.clone())
        .bind(&pool.name)
        .bind(pool.executor.as_str())
        .bind(serde_json::to_string(&pool.nodes).unwrap_or_default())
        .bind(pool.gpu_hour_cost_cents)
        .bind(pool.created_at)
        .bind(fit.max_gpus)
        .bind(fit.max_gpu_memory_mb)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a pool with this name exists")))?;
    audit::record(
        &mut tx,
        pool.created_at,
        p,
        meta,
        "pool.create",
        "pool",
        &pool.id,
        json!({"name": pool.name, "executor": pool.executor, "nodes": pool.nodes.len(), "gpus": gpus, "shared": input.shared}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    Ok(pool)
}

/// What the pool's GPUs add up to, in milli-GPUs.
fn capacity(nodes: &[PoolNode]) -> i64 {
    nodes.iter().map(|n| i64::from(n.gpus) * WHOLE).sum()
}

/// The pool `id` as the caller may change it: their tenant's, or a shared one for platform
/// admins (403 for a tenant admin; another tenant's answers 404).
async fn pool_to_change(store: &Store, p: &Principal, id: &str) -> ApiResult<Pool> {
    require(p, Action::ManagePolicy)?;
    let pool = get_pool(store, p, id).await?;
    if pool.owner_tenant_id.is_none() || pool.executor == ExecutorKind::Local {
        require(p, Action::ManageSharedPools)?;
    }
    Ok(pool)
}

/// Changes a pool's name, executor, nodes or cost. Refused (409) while it would strand the
/// jobs placed on it, or leave a shared pool's grants above its capacity.
pub async fn update_pool(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    input: UpdatePool,
    local_pools_allowed: bool,
) -> ApiResult<Pool> {
    let current = pool_to_change(store, p, id).await?;
    let shared = current.owner_tenant_id.is_none();
    let merged = CreatePool {
        name: input.name.clone().unwrap_or_else(|| current.name.clone()),
        executor: input
            .executor
            .clone()
            .unwrap_or_else(|| current.executor.as_str().to_string()),
        nodes: input.nodes.clone().unwrap_or_else(|| current.nodes.clone()),
        gpu_hour_cost_cents: input
            .gpu_hour_cost_cents
            .unwrap_or(current.gpu_hour_cost_cents),
        shared,
    };
    let executor_changes = merged.executor != current.executor.as_str();
    if executor_changes && merged.executor == ExecutorKind::Local.as_str() {
        require(p, Action::ManageSharedPools)?;
        if !local_pools_allowed {
            return Err(AppError::field(
                "executor",
                "local pools are turned off on this server (setting allow_local_pools)",
            )
            .into());
        }
    }
    let name = merged.name.trim().to_lowercase();
    check_pool(&merged, &name)?;
    let executor = ExecutorKind::parse(&merged.executor).unwrap_or(current.executor);
    let fit = PoolFit::of(&merged.nodes);
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    if let Some(why) = in_use::pool_nodes(&mut tx, id, &merged.nodes, executor_changes).await? {
        return Err(AppError::Conflict(why).into());
    }
    let capacity_after = capacity(&merged.nodes);
    if shared && capacity_after < capacity(&current.nodes) {
        let granted: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(reservation_milli), 0) AS BIGINT) FROM pool_grants WHERE pool_id = $1",
        )
        .bind(id)
        .fetch_one(&mut *tx.tx)
        .await?;
        if granted > capacity_after {
            return Err(AppError::Conflict(format!(
                "The organizations' grants on this pool add up to {} GPUs, more than the {} GPUs it would have: lower the grants first.",
                format_gpus(granted),
                format_gpus(capacity_after)
            ))
            .into());
        }
    }
    sqlx::query("UPDATE pools SET name = $1, executor = $2, nodes = $3, gpu_hour_cost_cents = $4, fit_gpus = $5, fit_gpu_memory_mb = $6 WHERE id = $7")
        .bind(&name)
        .bind(executor.as_str())
        .bind(serde_json::to_string(&merged.nodes).unwrap_or_default())
        .bind(merged.gpu_hour_cost_cents)
        .bind(fit.max_gpus)
        .bind(fit.max_gpu_memory_mb)
        .bind(id)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a pool with this name exists")))?;
    let summary = |p: &Pool| json!({"name": p.name, "executor": p.executor, "nodes": p.nodes.len(), "gpus": capacity(&p.nodes) / WHOLE, "gpu_hour_cost_cents": p.gpu_hour_cost_cents});
    let pool = Pool {
        name,
        executor,
        nodes: merged.nodes,
        gpu_hour_cost_cents: merged.gpu_hour_cost_cents,
        ..current.clone()
    };
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "pool.update",
        "pool",
        id,
        json!({"from": summary(&current), "to": summary(&pool)}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    Ok(pool)
}

/// Deletes a pool no queue lists and no live job runs on (409 otherwise). Its per-pool
/// quotas and grants go with it.
pub async fn delete_pool(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    let pool = pool_to_change(store, p, id).await?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    if let Some(why) = in_use::pool(&mut tx, p.tenant_id(), id).await? {
        return Err(AppError::Conflict(why).into());
    }
    let grants: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pool_grants WHERE pool_id = $1")
        .bind(id)
        .fetch_one(&mut *tx.tx)
        .await?;
    let quotas: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM policy_pools WHERE pool_id = $1")
        .bind(id)
        .fetch_one(&mut *tx.tx)
        .await?;
    // Grants and per-pool quotas go by `ON DELETE CASCADE`.
    sqlx::query("DELETE FROM pools WHERE id = $1")
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "pool.delete",
        "pool",
        id,
        json!({"name": pool.name, "shared": pool.owner_tenant_id.is_none(), "nodes": pool.nodes.len(), "gpus": capacity(&pool.nodes) / WHOLE, "grants_removed": grants, "quotas_removed": quotas}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool as the page's form declares it: `count` nodes named `{name}-{i}`.
    fn from_form(name: &str, count: usize) -> CreatePool {
        CreatePool {
            name: name.to_string(),
            executor: "simulated".into(),
            nodes: (1..=count)
                .map(|i| PoolNode {
                    name: format!("{}-{i}", name.trim()),
                    gpus: 8,
                    gpu_model: "H100-80GB".into(),
                    gpu_memory_mb: 81920,
                    cpu_cores: 0,
                    memory_mb: 0,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn fields(input: &CreatePool) -> Vec<(String, String)> {
        let name = input.name.trim().to_lowercase();
        match check_pool(input, &name) {
            Ok(()) => Vec::new(),
            Err(AppError::Validation(errors)) => {
                errors.into_iter().map(|e| (e.field, e.message)).collect()
            }
            Err(other) => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_pool_name_error_is_at_the_name_not_the_nodes() {
        // Empty: the nodes are "-1", "-2", which is the name's fault alone.
        let errors = fields(&from_form("", 2));
        assert_eq!(errors, [("name".into(), "is required".into())]);
        let errors = fields(&from_form("bad name!", 1));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, "name");
        // Upper case is fine for the pool (lower-cased) but not for the nodes named after it.
        let errors = fields(&from_form("GPU-A", 1));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, "name");
        assert!(errors[0].1.contains("lower-case"), "{errors:?}");
        // A name so long that its nodes' names are too long.
        let errors = fields(&from_form(&"a".repeat(62), 2));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, "name");
        assert!(errors[0].1.contains("too long"), "{errors:?}");
        assert!(fields(&from_form("gpu-a", 2)).is_empty());
    }

    #[test]
    fn node_names_not_from_the_pool_name_are_still_checked() {
        let mut input = from_form("pool", 1);
        input.nodes[0].name = "Node 1".into();
        assert_eq!(fields(&input)[0].0, "nodes");
        let mut input = from_form("", 1);
        input.nodes[0].name = "-x".into();
        let errors = fields(&input);
        assert!(errors.iter().any(|(f, _)| f == "name"), "{errors:?}");
        input.nodes[0].name = "Bad".into();
        let errors = fields(&input);
        assert!(errors.iter().any(|(f, _)| f == "nodes"), "{errors:?}");
    }
}
