//! Queues: a policy, a profile and pools in spillover order. Owns `queues`.

use super::*;

const QUEUE_SELECT: &str = "SELECT q.id, q.name, q.policy_id, pl.group_id, g.name AS group_name, q.profile_id, pr.name AS profile_name, q.pools, q.over_quota, q.classes, q.min_runtime_ms, q.created_at
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
        pools: parse_json(&r.try_get::<String, _>("pools")?)?,
        over_quota: r.try_get::<i64, _>("over_quota")? != 0,
        min_runtime_ms: r.try_get("min_runtime_ms")?,
        classes: parse_json(&r.try_get::<String, _>("classes")?)?,
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
    v.check(
        input
            .min_runtime_ms
            .is_none_or(|m| (0..=7 * 86_400_000).contains(&m)),
        "min_runtime_ms",
        "must be between 0 and 604800000 (7 days)",
    );
    v.finish()?;
    let now = store.now();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    sqlx::query("INSERT INTO queues (id, tenant_id, name, policy_id, profile_id, pools, over_quota, classes, min_runtime_ms, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
        .bind(&id)
        .bind(p.tenant_id())
        .bind(&name)
        .bind(&input.policy_id)
        .bind(&input.profile_id)
        .bind(serde_json::to_string(&input.pools).unwrap_or_default())
        .bind(flag(input.over_quota))
        .bind(serde_json::to_string(&classes).unwrap_or_default())
        .bind(input.min_runtime_ms)
        .bind(now)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a queue with this name exists")))?;
    self::grants::check(&mut tx, p.tenant_id(), "pools").await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "queue.create",
        "queue",
        &id,
        json!({"name": name, "group": policy.map(|x| x.group_name), "profile": profile.map(|x| x.name), "pools": pool_names, "over_quota": input.over_quota, "min_runtime_ms": input.min_runtime_ms}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    get_queue(store, p, &id).await
}
