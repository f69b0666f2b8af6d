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

/// A queue's fields as create and change check them alike.
struct QueueFields<'a> {
    name: &'a str,
    profile_id: &'a str,
    pools: &'a [String],
    classes: &'a [PriorityClass],
    min_runtime_ms: Option<i64>,
}

/// Checks `f` into `v`; returns the names of its profile and pools (for the audit entry).
async fn check_queue(
    store: &Store,
    p: &Principal,
    f: &QueueFields<'_>,
    v: &mut Validator,
) -> ApiResult<(Option<String>, Vec<String>)> {
    v.check(
        slug_ok(f.name),
        "name",
        "use 1 to 63 lower-case letters, digits, '-', '_' or '.'",
    );
    let profile = found(get_profile(store, p, f.profile_id).await)?;
    v.check(
        profile.is_some(),
        "profile_id",
        "no such profile in your organization",
    );
    v.check(!f.pools.is_empty(), "pools", "choose at least one pool");
    v.check(f.pools.len() <= 8, "pools", "at most 8 pools");
    let mut seen = std::collections::HashSet::new();
    let mut pool_names = Vec::new();
    for id in f.pools {
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
        !f.classes.is_empty() && f.classes.len() <= 8,
        "classes",
        "declare 1 to 8 priority classes",
    );
    let mut class_names = std::collections::HashSet::new();
    for c in f.classes {
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
        f.min_runtime_ms
            .is_none_or(|m| (0..=7 * 86_400_000).contains(&m)),
        "min_runtime_ms",
        "must be between 0 and 604800000 (7 days)",
    );
    Ok((profile.map(|x| x.name), pool_names))
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
    let policy = found(get_policy(store, p, &input.policy_id).await)?;
    v.check(
        policy.is_some(),
        "policy_id",
        "no such policy in your organization",
    );
    let fields = QueueFields {
        name: &name,
        profile_id: &input.profile_id,
        pools: &input.pools,
        classes: &classes,
        min_runtime_ms: input.min_runtime_ms,
    };
    let (profile, pool_names) = check_queue(store, p, &fields, &mut v).await?;
    v.finish()?;
    let now = store.now();
    let id = new_id();
    let mut tx = store.begin_write().await?;
    tx.config_changed();
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
        json!({"name": name, "group": policy.map(|x| x.group_name), "profile": profile, "pools": pool_names, "over_quota": input.over_quota, "min_runtime_ms": input.min_runtime_ms}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    get_queue(store, p, &id).await
}

/// Changes a queue's name, profile, pools, over-quota, classes or minimum runtime. Its waiting
/// jobs are placed by the new pools from the next cycle on; running ones stay where they are.
pub async fn update_queue(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    input: UpdateQueue,
) -> ApiResult<Queue> {
    require(p, Action::ManagePolicy)?;
    let current = get_queue(store, p, id).await?;
    let name = input
        .name
        .as_deref()
        .map(|n| n.trim().to_lowercase())
        .unwrap_or_else(|| current.name.clone());
    let profile_id = input.profile_id.as_deref().unwrap_or(&current.profile_id);
    let pools = input.pools.as_deref().unwrap_or(&current.pools);
    let classes = input.classes.as_deref().unwrap_or(&current.classes);
    let over_quota = input.over_quota.unwrap_or(current.over_quota);
    let min_runtime_ms = input.min_runtime_ms.unwrap_or(current.min_runtime_ms);
    let fields = QueueFields {
        name: &name,
        profile_id,
        pools,
        classes,
        min_runtime_ms,
    };
    let mut v = Validator::default();
    let (_, pool_names) = check_queue(store, p, &fields, &mut v).await?;
    v.finish()?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    sqlx::query("UPDATE queues SET name = $1, profile_id = $2, pools = $3, over_quota = $4, classes = $5, min_runtime_ms = $6 WHERE tenant_id = $7 AND id = $8")
        .bind(&name)
        .bind(profile_id)
        .bind(serde_json::to_string(pools).unwrap_or_default())
        .bind(flag(over_quota))
        .bind(serde_json::to_string(classes).unwrap_or_default())
        .bind(min_runtime_ms)
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a queue with this name exists")))?;
    // Pools it now lists may be shared ones the tenant's grant there must cover.
    self::grants::check(&mut tx, p.tenant_id(), "pools").await?;
    let to = json!({"name": name, "profile_id": profile_id, "pools": pool_names, "over_quota": over_quota, "classes": classes, "min_runtime_ms": min_runtime_ms});
    let from = json!({"name": current.name, "profile_id": current.profile_id, "pools": current.pools, "over_quota": current.over_quota, "classes": current.classes, "min_runtime_ms": current.min_runtime_ms});
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "queue.update",
        "queue",
        id,
        json!({"group": current.group_name, "from": from, "to": to}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    get_queue(store, p, id).await
}

/// Deletes a queue without jobs (409 while it has live ones, or the history of finished ones).
pub async fn delete_queue(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManagePolicy)?;
    let queue = get_queue(store, p, id).await?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    if let Some(why) = crate::store::in_use::queue(&mut tx, p.tenant_id(), id).await? {
        return Err(AppError::Conflict(why).into());
    }
    sqlx::query("DELETE FROM queues WHERE tenant_id = $1 AND id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "queue.delete",
        "queue",
        id,
        json!({"name": queue.name, "group": queue.group_name}),
    )
    .await?;
    tx.wake_scheduler();
    tx.commit().await?;
    Ok(())
}
