//! Pools, profiles, policies and queues: the resource policy a tenant's admins configure.
//! Every query is scoped by the caller's tenant; shared pools (no owner) are visible to all
//! tenants and created by platform admins only.

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::core::WHOLE;
use crate::api::error::{unique_violation_as, ApiResult, AppError, Validator};
use crate::audit;
use crate::clock::now_ms;
use crate::identity::directory::slug_ok;
use crate::identity::require;
use crate::store::{flag, new_id, Store};

pub const EXECUTORS: &[&str] = &["simulated", "local"];
/// The most nodes one pool may declare (the benchmark's 1,250 x 8 fits).
pub const MAX_NODES: usize = 5000;
pub const MAX_GPUS_PER_NODE: u32 = 16;

/// Whether an amount of milli-GPUs can be requested: a fraction of one GPU, or whole GPUs.
pub fn valid_amount(m: i64) -> bool {
    (1..WHOLE as i64).contains(&m)
        || (m >= WHOLE as i64 && m % WHOLE as i64 == 0 && m <= (MAX_GPUS_PER_NODE * WHOLE) as i64)
}

pub fn default_classes() -> Vec<PriorityClass> {
    vec![
        PriorityClass {
            name: "high".into(),
            priority: 100,
            preemptible: false,
        },
        PriorityClass {
            name: "normal".into(),
            priority: 50,
            preemptible: true,
        },
        PriorityClass {
            name: "low".into(),
            priority: 10,
            preemptible: true,
        },
    ]
}

/// `Ok(None)` for a missing row, so a caller can turn it into a field error while a database
/// failure still answers 500.
fn found<T>(r: ApiResult<T>) -> ApiResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(crate::api::error::ApiError(AppError::NotFound)) => Ok(None),
        Err(e) => Err(e),
    }
}

fn parse_json<T: serde::de::DeserializeOwned + Default>(s: &str) -> T {
    serde_json::from_str(s).unwrap_or_default()
}

// ---- pools --------------------------------------------------------------------------------

const POOL_COLUMNS: &str =
    "id, owner_tenant_id, name, executor, nodes, gpu_hour_cost_cents, created_at";

pub(crate) fn pool_from_row(r: &AnyRow) -> Result<Pool, sqlx::Error> {
    Ok(Pool {
        id: r.try_get("id")?,
        owner_tenant_id: r.try_get("owner_tenant_id")?,
        name: r.try_get("name")?,
        executor: r.try_get("executor")?,
        nodes: parse_json(&r.try_get::<String, _>("nodes")?),
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolFit {
    /// The most GPUs on one node.
    pub max_gpus: i64,
    /// The largest GPU memory among nodes that have GPUs.
    pub max_gpu_memory_mb: i64,
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
        }
    }

    /// Whether a job of `gpu_milli` (with a per-device memory floor for fractions) fits on
    /// one node. Gangs across nodes are not scheduled.
    pub fn fits(&self, gpu_milli: i64, gpu_memory_mb: i64) -> bool {
        if gpu_milli < 1000 {
            self.max_gpus > 0 && (gpu_memory_mb == 0 || gpu_memory_mb <= self.max_gpu_memory_mb)
        } else {
            gpu_milli <= self.max_gpus * 1000
        }
    }
}

/// The shapes of those of `ids` the tenant may use (from the row, without its node list).
pub async fn pool_fits(store: &Store, p: &Principal, ids: &[String]) -> ApiResult<Vec<PoolFit>> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let row = sqlx::query(
            "SELECT fit_gpus, fit_gpu_memory_mb FROM pools WHERE id = $1 AND (owner_tenant_id IS NULL OR owner_tenant_id = $2)",
        )
        .bind(id)
        .bind(p.tenant_id())
        .fetch_optional(&store.pool)
        .await?;
        if let Some(r) = row {
            out.push(PoolFit {
                max_gpus: r.try_get("fit_gpus")?,
                max_gpu_memory_mb: r.try_get("fit_gpu_memory_mb")?,
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

pub async fn create_pool(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreatePool,
) -> ApiResult<Pool> {
    require(p, Action::ManagePolicy)?;
    if input.shared {
        require(p, Action::ManageSharedPools)?;
    }
    let name = input.name.trim().to_lowercase();
    let mut v = Validator::default();
    v.check(
        slug_ok(&name),
        "name",
        "use 1 to 63 lower-case letters, digits, '-', '_' or '.'",
    );
    v.check(
        EXECUTORS.contains(&input.executor.as_str()),
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
    for n in &input.nodes {
        if !slug_ok(&n.name) {
            v.check(
                false,
                "nodes",
                "node names use lower-case letters, digits, '-', '_' or '.'",
            );
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
    }
    v.finish()?;
    let pool = Pool {
        id: new_id(),
        name,
        owner_tenant_id: (!input.shared).then(|| p.tenant_id().to_string()),
        executor: input.executor,
        nodes: input.nodes,
        gpu_hour_cost_cents: input.gpu_hour_cost_cents,
        created_at: now_ms(),
    };
    let gpus: u32 = pool.nodes.iter().map(|n| n.gpus).sum();
    let fit = PoolFit::of(&pool.nodes);
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO pools (id, owner_tenant_id, name, executor, nodes, gpu_hour_cost_cents, created_at, fit_gpus, fit_gpu_memory_mb) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)")
        .bind(&pool.id)
        .bind(pool.owner_tenant_id.clone())
        .bind(&pool.name)
        .bind(&pool.executor)
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
    tx.commit().await?;
    Ok(pool)
}

// ---- profiles -----------------------------------------------------------------------------

const PROFILE_COLUMNS: &str = "id, name, gpu_milli, min_gpu_milli, max_gpu_milli, gpu_memory_mb, cpu_milli, memory_mb, created_at";

fn profile_from_row(r: &AnyRow) -> Result<Profile, sqlx::Error> {
    Ok(Profile {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        gpu_milli: r.try_get("gpu_milli")?,
        min_gpu_milli: r.try_get("min_gpu_milli")?,
        max_gpu_milli: r.try_get("max_gpu_milli")?,
        gpu_memory_mb: r.try_get("gpu_memory_mb")?,
        cpu_milli: r.try_get("cpu_milli")?,
        memory_mb: r.try_get("memory_mb")?,
        created_at: r.try_get("created_at")?,
    })
}

pub async fn list_profiles(store: &Store, p: &Principal) -> ApiResult<Vec<Profile>> {
    require(p, Action::SubmitJobs)?;
    let rows = sqlx::query(&format!(
        "SELECT {PROFILE_COLUMNS} FROM profiles WHERE tenant_id = $1 ORDER BY name"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows
        .iter()
        .map(profile_from_row)
        .collect::<Result<_, _>>()?)
}

pub async fn get_profile(store: &Store, p: &Principal, id: &str) -> ApiResult<Profile> {
    require(p, Action::SubmitJobs)?;
    let row = sqlx::query(&format!(
        "SELECT {PROFILE_COLUMNS} FROM profiles WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(profile_from_row(&row)?)
}

pub async fn create_profile(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateProfile,
) -> ApiResult<Profile> {
    require(p, Action::ManagePolicy)?;
    let name = input.name.trim().to_lowercase();
    let fixed = input.gpu_milli;
    let (min, max) = if fixed > 0 {
        (fixed, fixed)
    } else {
        (
            input.min_gpu_milli.unwrap_or(125),
            input.max_gpu_milli.unwrap_or(WHOLE as i64),
        )
    };
    let mut v = Validator::default();
    v.check(
        slug_ok(&name),
        "name",
        "use 1 to 63 lower-case letters, digits, '-', '_' or '.'",
    );
    v.check(
        fixed == 0 || valid_amount(fixed),
        "gpu_milli",
        "use 1 to 999 milli-GPUs (a fraction) or whole GPUs (multiples of 1000, at most 16000)",
    );
    v.check(fixed >= 0, "gpu_milli", "must not be negative");
    if fixed == 0 {
        v.check(
            valid_amount(min),
            "min_gpu_milli",
            "must be a valid amount (1 to 999, or whole GPUs)",
        );
        v.check(
            valid_amount(max),
            "max_gpu_milli",
            "must be a valid amount (1 to 999, or whole GPUs)",
        );
        v.check(
            min <= max,
            "max_gpu_milli",
            "must be at least min_gpu_milli",
        );
    } else {
        // A fixed profile does not use them, but what is sent must still be an amount.
        for (field, value) in [
            ("min_gpu_milli", input.min_gpu_milli),
            ("max_gpu_milli", input.max_gpu_milli),
        ] {
            v.check(
                value.is_none_or(|m| (1..=16_000).contains(&m)),
                field,
                "must be between 1 and 16000",
            );
        }
    }
    v.check(
        (0..=1_048_576).contains(&input.gpu_memory_mb),
        "gpu_memory_mb",
        "must be between 0 and 1048576",
    );
    v.check(
        (0..=1_024_000).contains(&input.cpu_milli),
        "cpu_milli",
        "must be between 0 and 1024000",
    );
    v.check(
        (0..=16_777_216).contains(&input.memory_mb),
        "memory_mb",
        "must be between 0 and 16777216",
    );
    v.finish()?;
    let profile = Profile {
        id: new_id(),
        name,
        gpu_milli: fixed,
        min_gpu_milli: min,
        max_gpu_milli: max,
        gpu_memory_mb: input.gpu_memory_mb,
        cpu_milli: input.cpu_milli,
        memory_mb: input.memory_mb,
        created_at: now_ms(),
    };
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO profiles (id, tenant_id, name, gpu_milli, min_gpu_milli, max_gpu_milli, gpu_memory_mb, cpu_milli, memory_mb, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
        .bind(&profile.id)
        .bind(p.tenant_id())
        .bind(&profile.name)
        .bind(profile.gpu_milli)
        .bind(profile.min_gpu_milli)
        .bind(profile.max_gpu_milli)
        .bind(profile.gpu_memory_mb)
        .bind(profile.cpu_milli)
        .bind(profile.memory_mb)
        .bind(profile.created_at)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a profile with this name exists")))?;
    audit::record(
        &mut tx,
        profile.created_at,
        p,
        meta,
        "profile.create",
        "profile",
        &profile.id,
        json!({"name": profile.name, "gpu_milli": fixed, "min_gpu_milli": min, "max_gpu_milli": max}),
    )
    .await?;
    tx.commit().await?;
    Ok(profile)
}

// ---- policies -----------------------------------------------------------------------------

const POLICY_SELECT: &str = "SELECT pl.id, pl.group_id, g.name AS group_name, pl.reservation_milli, pl.limit_milli, pl.over_quota_weight, pl.over_quota_allowed, pl.exceed_users, pl.updated_at FROM policies pl JOIN groups g ON g.id = pl.group_id";

fn policy_from_row(r: &AnyRow) -> Result<Policy, sqlx::Error> {
    Ok(Policy {
        id: r.try_get("id")?,
        group_id: r.try_get("group_id")?,
        group_name: r.try_get("group_name")?,
        reservation_milli: r.try_get("reservation_milli")?,
        limit_milli: r.try_get("limit_milli")?,
        over_quota_weight: r.try_get("over_quota_weight")?,
        over_quota_allowed: r.try_get::<i64, _>("over_quota_allowed")? != 0,
        exceed_users: parse_json(&r.try_get::<String, _>("exceed_users")?),
        updated_at: r.try_get("updated_at")?,
    })
}

pub async fn list_policies(store: &Store, p: &Principal) -> ApiResult<Vec<Policy>> {
    require(p, Action::SubmitJobs)?;
    let rows = sqlx::query(&format!(
        "{POLICY_SELECT} WHERE pl.tenant_id = $1 ORDER BY g.name"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows.iter().map(policy_from_row).collect::<Result<_, _>>()?)
}

pub async fn get_policy(store: &Store, p: &Principal, id: &str) -> ApiResult<Policy> {
    require(p, Action::SubmitJobs)?;
    let row = sqlx::query(&format!(
        "{POLICY_SELECT} WHERE pl.tenant_id = $1 AND pl.id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(policy_from_row(&row)?)
}

/// Creates the group's policy or replaces its values (one policy per group).
pub async fn set_policy(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: SetPolicy,
) -> ApiResult<Policy> {
    require(p, Action::ManagePolicy)?;
    let group_ok: Option<String> =
        sqlx::query_scalar("SELECT id FROM groups WHERE tenant_id = $1 AND id = $2")
            .bind(p.tenant_id())
            .bind(&input.group_id)
            .fetch_optional(&store.pool)
            .await?;
    let mut v = Validator::default();
    v.check(
        group_ok.is_some(),
        "group_id",
        "no such group in your organization",
    );
    v.check(
        (0..=100_000_000).contains(&input.reservation_milli),
        "reservation_milli",
        "must be between 0 and 100000000",
    );
    v.check(
        (0..=100_000_000).contains(&input.limit_milli),
        "limit_milli",
        "must be between 0 and 100000000",
    );
    v.check(
        input.limit_milli >= input.reservation_milli,
        "limit_milli",
        "must be at least the reservation",
    );
    v.check(
        (0..=1000).contains(&input.over_quota_weight),
        "over_quota_weight",
        "must be between 0 and 1000",
    );
    v.check(
        input.exceed_users.len() <= 1000,
        "exceed_users",
        "at most 1000 users",
    );
    v.finish()?;
    for u in &input.exceed_users {
        let known: Option<String> =
            sqlx::query_scalar("SELECT id FROM users WHERE tenant_id = $1 AND id = $2")
                .bind(p.tenant_id())
                .bind(u)
                .fetch_optional(&store.pool)
                .await?;
        if known.is_none() {
            return Err(AppError::field("exceed_users", format!("no such user: {u}")).into());
        }
    }
    let now = now_ms();
    let exceed = serde_json::to_string(&input.exceed_users).unwrap_or_else(|_| "[]".into());
    let mut tx = store.begin_write().await?;
    let current = sqlx::query(&format!(
        "{POLICY_SELECT} WHERE pl.tenant_id = $1 AND pl.group_id = $2"
    ))
    .bind(p.tenant_id())
    .bind(&input.group_id)
    .fetch_optional(&mut *tx.tx)
    .await?
    .map(|r| policy_from_row(&r))
    .transpose()?;
    let (id, action) = match &current {
        Some(c) => {
            sqlx::query("UPDATE policies SET reservation_milli = $1, limit_milli = $2, over_quota_weight = $3, over_quota_allowed = $4, exceed_users = $5, updated_at = $6 WHERE tenant_id = $7 AND id = $8")
                .bind(input.reservation_milli)
                .bind(input.limit_milli)
                .bind(input.over_quota_weight)
                .bind(flag(input.over_quota_allowed))
                .bind(&exceed)
                .bind(now)
                .bind(p.tenant_id())
                .bind(&c.id)
                .execute(&mut *tx.tx)
                .await?;
            (c.id.clone(), "policy.update")
        }
        None => {
            let id = new_id();
            sqlx::query("INSERT INTO policies (id, tenant_id, group_id, reservation_milli, limit_milli, over_quota_weight, over_quota_allowed, exceed_users, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)")
                .bind(&id)
                .bind(p.tenant_id())
                .bind(&input.group_id)
                .bind(input.reservation_milli)
                .bind(input.limit_milli)
                .bind(input.over_quota_weight)
                .bind(flag(input.over_quota_allowed))
                .bind(&exceed)
                .bind(now)
                .execute(&mut *tx.tx)
                .await?;
            (id, "policy.create")
        }
    };
    let to = json!({"reservation_milli": input.reservation_milli, "limit_milli": input.limit_milli, "over_quota_weight": input.over_quota_weight, "over_quota_allowed": input.over_quota_allowed, "exceed_users": input.exceed_users});
    let from = current.map(|c| json!({"reservation_milli": c.reservation_milli, "limit_milli": c.limit_milli, "over_quota_weight": c.over_quota_weight, "over_quota_allowed": c.over_quota_allowed, "exceed_users": c.exceed_users}));
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        action,
        "policy",
        &id,
        json!({"group_id": input.group_id, "from": from, "to": to}),
    )
    .await?;
    tx.commit().await?;
    get_policy(store, p, &id).await
}

// ---- queues -------------------------------------------------------------------------------

const QUEUE_SELECT: &str = "SELECT q.id, q.name, q.policy_id, pl.group_id, g.name AS group_name, q.profile_id, pr.name AS profile_name, q.pools, q.over_quota, q.classes, q.created_at
    FROM queues q JOIN policies pl ON pl.id = q.policy_id JOIN groups g ON g.id = pl.group_id JOIN profiles pr ON pr.id = q.profile_id";

fn queue_from_row(r: &AnyRow) -> Result<Queue, sqlx::Error> {
    Ok(Queue {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        policy_id: r.try_get("policy_id")?,
        group_id: r.try_get("group_id")?,
        group_name: r.try_get("group_name")?,
        profile_id: r.try_get("profile_id")?,
        profile_name: r.try_get("profile_name")?,
        pools: parse_json(&r.try_get::<String, _>("pools")?),
        over_quota: r.try_get::<i64, _>("over_quota")? != 0,
        classes: parse_json(&r.try_get::<String, _>("classes")?),
        created_at: r.try_get("created_at")?,
    })
}

pub async fn list_queues(store: &Store, p: &Principal) -> ApiResult<Vec<Queue>> {
    require(p, Action::SubmitJobs)?;
    let rows = sqlx::query(&format!(
        "{QUEUE_SELECT} WHERE q.tenant_id = $1 ORDER BY q.name"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows.iter().map(queue_from_row).collect::<Result<_, _>>()?)
}

/// The queues the caller may submit to: those of their groups (admins: all of the tenant's).
pub async fn usable_queues(store: &Store, p: &Principal) -> ApiResult<Vec<Queue>> {
    let all = list_queues(store, p).await?;
    if p.me.is_tenant_admin || p.me.is_platform_admin {
        return Ok(all);
    }
    let mine: Vec<String> = sqlx::query_scalar(
        "SELECT group_id FROM memberships WHERE tenant_id = $1 AND user_id = $2",
    )
    .bind(p.tenant_id())
    .bind(p.user_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(all
        .into_iter()
        .filter(|q| mine.contains(&q.group_id))
        .collect())
}

pub async fn get_queue(store: &Store, p: &Principal, id: &str) -> ApiResult<Queue> {
    require(p, Action::SubmitJobs)?;
    let row = sqlx::query(&format!(
        "{QUEUE_SELECT} WHERE q.tenant_id = $1 AND q.id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(queue_from_row(&row)?)
}

pub async fn create_queue(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateQueue,
) -> ApiResult<Queue> {
    require(p, Action::ManagePolicy)?;
    let name = input.name.trim().to_lowercase();
    let classes = input.classes.clone().unwrap_or_else(default_classes);
    let mut v = Validator::default();
    v.check(
        slug_ok(&name),
        "name",
        "use 1 to 63 lower-case letters, digits, '-', '_' or '.'",
    );
    let policy = found(get_policy(store, p, &input.policy_id).await)?;
    v.check(
        policy.is_some(),
        "policy_id",
        "no such policy in your organization",
    );
    let profile = found(get_profile(store, p, &input.profile_id).await)?;
    v.check(
        profile.is_some(),
        "profile_id",
        "no such profile in your organization",
    );
    v.check(!input.pools.is_empty(), "pools", "choose at least one pool");
    v.check(input.pools.len() <= 8, "pools", "at most 8 pools");
    let mut seen = std::collections::HashSet::new();
    let mut pool_names = Vec::new();
    for id in &input.pools {
        if !seen.insert(id) {
            v.check(false, "pools", "a pool may appear only once");
            break;
        }
        match found(get_pool(store, p, id).await)? {
            Some(pool) => pool_names.push(pool.name),
            None => {
                v.check(
                    false,
                    "pools",
                    "no such pool (or not available to your organization)",
                );
                break;
            }
        }
    }
    v.check(
        !classes.is_empty() && classes.len() <= 8,
        "classes",
        "declare 1 to 8 priority classes",
    );
    let mut class_names = std::collections::HashSet::new();
    for c in &classes {
        if !slug_ok(&c.name) || !class_names.insert(c.name.as_str()) {
            v.check(false, "classes", "class names must be unique slugs");
            break;
        }
        if !(0..=1000).contains(&c.priority) {
            v.check(false, "classes", "priorities are 0 to 1000");
            break;
        }
    }
    v.finish()?;
    let now = now_ms();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO queues (id, tenant_id, name, policy_id, profile_id, pools, over_quota, classes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)")
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&name)
        .bind(&input.policy_id)
        .bind(&input.profile_id)
        .bind(serde_json::to_string(&input.pools).unwrap_or_default())
        .bind(flag(input.over_quota))
        .bind(serde_json::to_string(&classes).unwrap_or_default())
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a queue with this name exists")))?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "queue.create",
        "queue",
        &id,
        json!({"name": name, "group": policy.map(|x| x.group_name), "profile": profile.map(|x| x.name), "pools": pool_names, "over_quota": input.over_quota}),
    )
    .await?;
    tx.commit().await?;
    get_queue(store, p, &id).await
}
