//! Tenant grants on shared pools: how many milli-GPUs a platform admin lets a tenant reserve on
//! a shared pool. A tenant's group policies whose queues use a shared pool count against the
//! tenant's grant there with their reservation on that pool (a per-pool quota's reservation,
//! else the policy's whole reservation), so
//! a tenant admin can never reserve more of a shared pool than a platform admin granted, and
//! cannot preempt other tenants' borrowed jobs beyond it. Grants of one pool never add up to
//! more than its capacity. The scheduler's tenant shares (a later change) build on this table.
//!
//! Owns the table `pool_grants`.

use std::collections::HashMap;

use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::Row;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use app::access::Action;
use app::model::*;

use crate::audit;
use crate::config::Config;
use crate::http::error::{ApiResult, AppError, Problem};
use crate::http::extract::ApiJson;
use crate::http::require;
use crate::http::Caller;
use crate::store::{Store, WriteTx};
use app::model::WHOLE_GPU_MILLI as WHOLE;

/// A tenant's grant on a shared pool.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PoolGrant {
    pub pool_id: String,
    pub tenant_id: String,
    pub tenant_slug: String,
    /// The most milli-GPUs the tenant's policies may reserve on the pool.
    pub reservation_milli: i64,
    /// What the tenant's policies reserve there now.
    pub reserved_milli: i64,
    pub updated_at: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPoolGrant {
    pub reservation_milli: i64,
}

/// The policy domain's REST routes beyond `scheduler::api`'s: the grants, and the changes and
/// deletes of pools, profiles, queues and policies (`super::api`). The router assembly merges
/// this one router.
pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Store: FromRef<S>,
    Arc<Config>: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list_grants))
        .routes(routes!(set_grant))
        .merge(super::api::router())
}

/// The grants on a shared pool: every tenant's for platform admins, the caller's own otherwise.
#[utoipa::path(get, path = "/pools/{id}/grants", tag = "policies", params(("id" = String, Path)), responses((status = 200, body = Vec<PoolGrant>), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn list_grants(
    State(store): State<Store>,
    Caller(p, _): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<PoolGrant>>> {
    Ok(Json(list(&store, &p, &id).await?))
}

/// Grant a tenant a reservation on a shared pool (platform admins). `0` removes the grant.
#[utoipa::path(put, path = "/pools/{id}/grants/{tenant_id}", tag = "policies", request_body = SetPoolGrant, params(("id" = String, Path), ("tenant_id" = String, Path)), responses((status = 200, body = PoolGrant), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn set_grant(
    State(store): State<Store>,
    Caller(p, meta): Caller,
    Path((id, tenant_id)): Path<(String, String)>,
    ApiJson(input): ApiJson<SetPoolGrant>,
) -> ApiResult<Json<PoolGrant>> {
    let g = set(&store, &p, &meta, &id, &tenant_id, input.reservation_milli).await?;
    Ok(Json(g))
}

/// A shared pool's id, name and capacity in milli-GPUs; `None` when no shared pool has the id.
async fn shared_pool(store: &Store, id: &str) -> ApiResult<Option<(String, i64)>> {
    let row =
        sqlx::query("SELECT name, nodes FROM pools WHERE id = $1 AND owner_tenant_id IS NULL")
            .bind(id)
            .fetch_optional(&store.pool)
            .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let nodes: Vec<PoolNode> = serde_json::from_str(&row.try_get::<String, _>("nodes")?)
        .map_err(|e| anyhow::anyhow!("pool {id}: stored nodes are not valid: {e}"))?;
    let capacity = nodes.iter().map(|n| i64::from(n.gpus) * WHOLE).sum();
    Ok(Some((row.try_get("name")?, capacity)))
}

pub async fn list(store: &Store, p: &Principal, pool_id: &str) -> ApiResult<Vec<PoolGrant>> {
    require(p, Action::SubmitJobs)?;
    if shared_pool(store, pool_id).await?.is_none() {
        return Err(AppError::NotFound.into());
    }
    let all = p.me.is_platform_admin;
    let rows = sqlx::query(
        "SELECT g.pool_id, g.tenant_id, t.slug, g.reservation_milli, g.updated_at FROM pool_grants g JOIN tenants t ON t.id = g.tenant_id
         WHERE g.pool_id = $1 AND ($2 = 1 OR g.tenant_id = $3) ORDER BY t.slug",
    )
    .bind(pool_id)
    .bind(i64::from(all))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let tenant_id: String = r.try_get("tenant_id")?;
        let reserved = reserved_on_shared(&store.pool, &tenant_id)
            .await?
            .get(pool_id)
            .copied()
            .unwrap_or(0);
        out.push(PoolGrant {
            pool_id: r.try_get("pool_id")?,
            tenant_slug: r.try_get("slug")?,
            tenant_id,
            reservation_milli: r.try_get("reservation_milli")?,
            reserved_milli: reserved,
            updated_at: r.try_get("updated_at")?,
        });
    }
    Ok(out)
}

pub async fn set(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    pool_id: &str,
    tenant_id: &str,
    reservation_milli: i64,
) -> ApiResult<PoolGrant> {
    require(p, Action::ManageSharedPools)?;
    let (pool_name, capacity) = shared_pool(store, pool_id)
        .await?
        .ok_or(AppError::NotFound)?;
    let slug: String = sqlx::query_scalar("SELECT slug FROM tenants WHERE id = $1")
        .bind(tenant_id)
        .fetch_optional(&store.pool)
        .await?
        .ok_or(AppError::NotFound)?;
    if !(0..=capacity).contains(&reservation_milli) {
        return Err(AppError::field(
            "reservation_milli",
            format!("must be between 0 and the pool's capacity, {capacity}"),
        )
        .into());
    }
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    let others: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(reservation_milli), 0) AS BIGINT) FROM pool_grants WHERE pool_id = $1 AND tenant_id <> $2",
    )
    .bind(pool_id)
    .bind(tenant_id)
    .fetch_one(&mut *tx.tx)
    .await?;
    if others.saturating_add(reservation_milli) > capacity {
        return Err(AppError::field(
            "reservation_milli",
            format!(
                "the pool's grants would total {} milli-GPUs, more than its capacity of {capacity}; other tenants hold {others}",
                others.saturating_add(reservation_milli)
            ),
        )
        .into());
    }
    let before: Option<i64> = sqlx::query_scalar(
        "SELECT reservation_milli FROM pool_grants WHERE pool_id = $1 AND tenant_id = $2",
    )
    .bind(pool_id)
    .bind(tenant_id)
    .fetch_optional(&mut *tx.tx)
    .await?;
    sqlx::query("DELETE FROM pool_grants WHERE pool_id = $1 AND tenant_id = $2")
        .bind(pool_id)
        .bind(tenant_id)
        .execute(&mut *tx.tx)
        .await?;
    if reservation_milli > 0 {
        sqlx::query("INSERT INTO pool_grants (pool_id, tenant_id, reservation_milli, updated_at) VALUES ($1, $2, $3, $4)")
            .bind(pool_id)
            .bind(tenant_id)
            .bind(reservation_milli)
            .bind(now)
            .execute(&mut *tx.tx)
            .await?;
    }
    let reserved = reserved_on_shared(&mut *tx.tx, tenant_id)
        .await?
        .get(pool_id)
        .copied()
        .unwrap_or(0);
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "pool.grant",
        "pool",
        pool_id,
        json!({"pool": pool_name, "tenant": slug, "from": before.unwrap_or(0), "to": reservation_milli, "reserved_now": reserved}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    Ok(PoolGrant {
        pool_id: pool_id.to_string(),
        tenant_id: tenant_id.to_string(),
        tenant_slug: slug,
        reservation_milli,
        reserved_milli: reserved,
        updated_at: now,
    })
}

/// What a tenant's policies reserve on each shared pool: the reservation of every policy with
/// a queue over the pool (its per-pool quota's there, if it has one), counted once per policy.
async fn reserved_on_shared<'c, E>(db: E, tenant_id: &str) -> Result<HashMap<String, i64>, AppError>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    // Queues with their policy's reservation, and each per-pool quota as a row of its own
    // (pools = NULL) that replaces the whole reservation on its pool.
    let rows = sqlx::query(
        "SELECT q.policy_id, q.pools, pl.reservation_milli, NULL AS quota_pool FROM queues q JOIN policies pl ON pl.id = q.policy_id WHERE q.tenant_id = $1
         UNION ALL
         SELECT pp.policy_id, NULL, pp.reservation_milli, pp.pool_id FROM policy_pools pp JOIN policies pl ON pl.id = pp.policy_id WHERE pl.tenant_id = $1",
    )
    .bind(tenant_id)
    .fetch_all(db)
    .await
    .map_err(|e| {
        tracing::error!(error = %e, "grants: reading queues");
        AppError::Internal
    })?;
    let mut quotas: HashMap<(String, String), i64> = HashMap::new();
    let mut per_pool: HashMap<String, HashMap<String, i64>> = HashMap::new();
    for r in rows {
        let read = |e: sqlx::Error| {
            tracing::error!(error = %e, "grants: reading a queue");
            AppError::Internal
        };
        let policy: String = r.try_get("policy_id").map_err(read)?;
        let reservation: i64 = r.try_get("reservation_milli").map_err(read)?;
        if let Some(pool) = r.try_get::<Option<String>, _>("quota_pool").map_err(read)? {
            quotas.insert((policy, pool), reservation);
            continue;
        }
        let pools: Vec<String> =
            serde_json::from_str(&r.try_get::<String, _>("pools").map_err(read)?).map_err(|e| {
                tracing::error!(error = %e, "grants: a queue's stored pools are not valid");
                AppError::Internal
            })?;
        for pool in pools {
            per_pool
                .entry(pool)
                .or_default()
                .insert(policy.clone(), reservation);
        }
    }
    Ok(per_pool
        .into_iter()
        .map(|(pool, policies)| {
            let total = policies
                .iter()
                .map(|(policy, whole)| {
                    *quotas.get(&(policy.clone(), pool.clone())).unwrap_or(whole)
                })
                .sum();
            (pool, total)
        })
        .collect())
}

/// Refuses the change in `tx` when it leaves the tenant reserving more of a shared pool than
/// its grant there. Called by the policy and queue writes before they commit.
pub async fn check(tx: &mut WriteTx, tenant_id: &str, field: &str) -> Result<(), AppError> {
    let reserved = reserved_on_shared(&mut *tx.tx, tenant_id).await?;
    for (pool_id, total) in reserved {
        if total == 0 {
            continue;
        }
        let row = sqlx::query(
            "SELECT p.name, COALESCE(g.reservation_milli, 0) AS granted FROM pools p
             LEFT JOIN pool_grants g ON g.pool_id = p.id AND g.tenant_id = $1
             WHERE p.id = $2 AND p.owner_tenant_id IS NULL",
        )
        .bind(tenant_id)
        .bind(&pool_id)
        .fetch_optional(&mut *tx.tx)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "grants: reading a grant");
            AppError::Internal
        })?;
        let Some(row) = row else {
            continue; // the tenant's own pool: no grant needed
        };
        let read = |e: sqlx::Error| {
            tracing::error!(error = %e, "grants: reading a grant");
            AppError::Internal
        };
        let name: String = row.try_get("name").map_err(read)?;
        let granted: i64 = row.try_get("granted").map_err(read)?;
        if total > granted {
            return Err(AppError::field(
                field,
                format!(
                    "your policies would reserve {total} milli-GPUs on the shared pool {name}, where your organization is granted {granted}; ask a platform admin for a larger grant"
                ),
            ));
        }
    }
    Ok(())
}
