//! Group policies: reservation, limit, over-quota weight, and per-pool quotas. Owns
//! `policies` and `policy_pools`.

use super::*;

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
        exceed_users: parse_json(&r.try_get::<String, _>("exceed_users")?)?,
        pools: Vec::new(),
        updated_at: r.try_get("updated_at")?,
    })
}

/// Fills in the per-pool quotas of the tenant's `policies`.
async fn with_pools<'c, E>(
    db: E,
    tenant_id: &str,
    policies: &mut [Policy],
) -> Result<(), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    let rows = sqlx::query(
        "SELECT pp.policy_id, pp.pool_id, p.name AS pool_name, pp.reservation_milli, pp.limit_milli
         FROM policy_pools pp JOIN policies pl ON pl.id = pp.policy_id JOIN pools p ON p.id = pp.pool_id
         WHERE pl.tenant_id = $1 ORDER BY p.name",
    )
    .bind(tenant_id)
    .fetch_all(db)
    .await?;
    for r in &rows {
        let policy: String = r.try_get("policy_id")?;
        if let Some(pl) = policies.iter_mut().find(|pl| pl.id == policy) {
            pl.pools.push(PoolQuota {
                pool_id: r.try_get("pool_id")?,
                pool_name: r.try_get("pool_name")?,
                reservation_milli: r.try_get("reservation_milli")?,
                limit_milli: r.try_get("limit_milli")?,
            });
        }
    }
    Ok(())
}

pub async fn list_policies(store: &Store, p: &Principal) -> ApiResult<Vec<Policy>> {
    require(p, Action::SubmitJobs)?;
    let rows = sqlx::query(&format!(
        "{POLICY_SELECT} WHERE pl.tenant_id = $1 ORDER BY g.name"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    let mut out: Vec<Policy> = rows.iter().map(policy_from_row).collect::<Result<_, _>>()?;
    with_pools(&store.pool, p.tenant_id(), &mut out).await?;
    Ok(out)
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
    let mut out = [policy_from_row(&row)?];
    with_pools(&store.pool, p.tenant_id(), &mut out).await?;
    let [policy] = out;
    Ok(policy)
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
    let quotas = input.pools.clone().unwrap_or_default();
    v.check(quotas.len() <= 16, "pools", "at most 16 per-pool quotas");
    let mut seen = std::collections::HashSet::new();
    for q in &quotas {
        if !seen.insert(q.pool_id.as_str()) {
            v.check(false, "pools", "a pool may have one quota only");
            break;
        }
        if !(0..=q.limit_milli).contains(&q.reservation_milli) || q.limit_milli > input.limit_milli
        {
            v.check(
                false,
                "pools",
                "each pool's reservation_milli must be between 0 and its limit_milli, and its limit_milli at most the policy's limit_milli",
            );
            break;
        }
    }
    v.finish()?;
    for q in &quotas {
        if found(get_pool(store, p, &q.pool_id).await)?.is_none() {
            return Err(AppError::field(
                "pools",
                "no such pool (or not available to your organization)",
            )
            .into());
        }
    }
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
    let now = store.now();
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
    let mut before = current.map(|c| [c]);
    if let Some(b) = before.as_mut() {
        with_pools(&mut *tx.tx, p.tenant_id(), b).await?;
    }
    if input.pools.is_some() {
        sqlx::query("DELETE FROM policy_pools WHERE policy_id = $1")
            .bind(&id)
            .execute(&mut *tx.tx)
            .await?;
        for q in &quotas {
            sqlx::query("INSERT INTO policy_pools (policy_id, pool_id, reservation_milli, limit_milli) VALUES ($1, $2, $3, $4)")
                .bind(&id)
                .bind(&q.pool_id)
                .bind(q.reservation_milli)
                .bind(q.limit_milli)
                .execute(&mut *tx.tx)
                .await?;
        }
    }
    self::grants::check(&mut tx, p.tenant_id(), "reservation_milli").await?;
    let quota_json = |qs: &[PoolQuota]| {
        qs.iter()
            .map(|q| json!({"pool_id": q.pool_id, "reservation_milli": q.reservation_milli, "limit_milli": q.limit_milli}))
            .collect::<Vec<_>>()
    };
    let to = json!({"reservation_milli": input.reservation_milli, "limit_milli": input.limit_milli, "over_quota_weight": input.over_quota_weight, "over_quota_allowed": input.over_quota_allowed, "exceed_users": input.exceed_users, "pools": input.pools.as_deref().map(quota_json)});
    let from = before.map(|[c]| json!({"reservation_milli": c.reservation_milli, "limit_milli": c.limit_milli, "over_quota_weight": c.over_quota_weight, "over_quota_allowed": c.over_quota_allowed, "exceed_users": c.exceed_users, "pools": quota_json(&c.pools)}));
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
    tx.wake_scheduler();
    tx.commit().await?;
    get_policy(store, p, &id).await
}

/// Deletes a group's policy no queue is under (409 otherwise); its per-pool quotas go with it.
/// The group keeps its members; without a policy it gets no GPUs.
pub async fn delete_policy(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManagePolicy)?;
    let policy = get_policy(store, p, id).await?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    if let Some(why) = crate::store::in_use::policy(&mut tx, p.tenant_id(), id).await? {
        return Err(AppError::Conflict(why).into());
    }
    sqlx::query("DELETE FROM policy_pools WHERE policy_id = $1")
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    sqlx::query("DELETE FROM policies WHERE tenant_id = $1 AND id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "policy.delete",
        "policy",
        id,
        json!({"group_id": policy.group_id, "group": policy.group_name, "reservation_milli": policy.reservation_milli, "limit_milli": policy.limit_milli, "pools": policy.pools.len()}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    Ok(())
}
