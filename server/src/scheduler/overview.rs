//! What the Policy Manager and the builder portal show: capacity per pool (in quota, over
//! quota, idle, reserved), use per group, queue statistics and recent preemptions. Computed
//! from the same snapshot the scheduler decides on, so "over quota" means exactly what the
//! core means by it: the counts the leading driver publishes each time it brings its snapshot
//! up to date ([`Summary`]), or those of a snapshot loaded here when no driver leads in this
//! process. A tenant sees every pool it may use, the totals on shared pools (not who else uses
//! them), and only its own groups, queues and jobs.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::driver::{load, SchedulerHandle, Summary};
use super::jobs::{list_jobs, JobFilter};
use crate::http::error::ApiResult;
use crate::http::require;
use crate::policy::{list_pools, list_queues, usable_queues};
use crate::store::Store;

/// The scheduler's counts: those the driver published, or, when no driver leads in this
/// process, those of a snapshot loaded now.
async fn counts(store: &Store, sched: &SchedulerHandle) -> ApiResult<Arc<Summary>> {
    if let Some(s) = sched.summary(store).await {
        return Ok(s);
    }
    let l = load(store, store.now(), 0).await?;
    Ok(Arc::new(Summary::of(&l, 0)))
}

async fn groups_usage(
    store: &Store,
    p: &Principal,
    s: &Summary,
    only: Option<&[String]>,
) -> ApiResult<Vec<GroupUsage>> {
    let rows = sqlx::query(
        "SELECT p.group_id, g.name, p.reservation_milli, p.limit_milli, p.over_quota_weight, p.over_quota_allowed
         FROM policies p JOIN groups g ON g.id = p.group_id WHERE p.tenant_id = $1 ORDER BY g.name",
    )
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    let mut out = Vec::new();
    for r in &rows {
        let gid: String = r.try_get("group_id")?;
        if only.is_some_and(|o| !o.contains(&gid)) {
            continue;
        }
        let u = s.groups.get(&gid).copied().unwrap_or_default();
        out.push(GroupUsage {
            group_id: gid,
            group_name: r.try_get("name")?,
            reservation_milli: r.try_get("reservation_milli")?,
            limit_milli: r.try_get("limit_milli")?,
            over_quota_weight: r.try_get("over_quota_weight")?,
            over_quota_allowed: r.try_get::<i64, _>("over_quota_allowed")? != 0,
            used_milli: u.used_milli,
            over_quota_milli: u.over_quota_milli,
            running: u.running,
            waiting: u.waiting,
        });
    }
    Ok(out)
}

/// The Policy Manager's view of the caller's tenant.
pub async fn overview(
    store: &Store,
    sched: &SchedulerHandle,
    p: &Principal,
) -> ApiResult<PolicyOverview> {
    require(p, Action::ViewPolicy)?;
    let now = store.now();
    // Pools: totals over every tenant's jobs (capacity is shared), reservations of ours.
    let s = counts(store, sched).await?;
    let queues = list_queues(store, p).await?;
    let policies = sqlx::query("SELECT id, reservation_milli FROM policies WHERE tenant_id = $1")
        .bind(p.tenant_id())
        .fetch_all(&store.pool)
        .await?;
    let reservation: HashMap<String, i64> = policies
        .iter()
        .map(|r| Ok((r.try_get("id")?, r.try_get("reservation_milli")?)))
        .collect::<Result<_, sqlx::Error>>()?;
    // A group's reservation counts once, at the first pool of its first queue.
    let mut reserved_at: HashMap<String, i64> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for q in &queues {
        if let Some(first) = q.pools.first() {
            if seen.insert(q.policy_id.clone()) {
                *reserved_at.entry(first.clone()).or_default() +=
                    reservation.get(&q.policy_id).copied().unwrap_or(0);
            }
        }
    }
    let mut pools = Vec::new();
    for pool in list_pools(store, p).await? {
        let total: i64 = pool.nodes.iter().map(|n| n.gpus as i64 * 1000).sum();
        let (in_quota, over_quota) = s.pools.get(&pool.id).copied().unwrap_or_default();
        pools.push(PoolUsage {
            shared: pool.owner_tenant_id.is_none(),
            reserved_milli: reserved_at.get(&pool.id).copied().unwrap_or(0),
            pool_id: pool.id,
            name: pool.name,
            executor: pool.executor,
            total_milli: total,
            in_quota_milli: in_quota,
            over_quota_milli: over_quota,
            idle_milli: (total - in_quota - over_quota).max(0),
        });
    }
    let groups = groups_usage(store, p, &s, None).await?;
    let queue_stats = queue_stats(store, p, &s, &queues, now).await?;
    let preemptions = recent_preemptions(store, p).await?;
    Ok(PolicyOverview {
        pools,
        groups,
        queues: queue_stats,
        preemptions,
    })
}

async fn queue_stats(
    store: &Store,
    p: &Principal,
    s: &Summary,
    queues: &[Queue],
    now: i64,
) -> ApiResult<Vec<QueueStats>> {
    // `queues` are the caller's tenant's, so their counts are of its jobs only.
    let rows = sqlx::query(
        "SELECT queue_id, CAST(AVG(started_at - queued_at) AS BIGINT) AS avg_wait FROM jobs
         WHERE tenant_id = $1 AND started_at IS NOT NULL AND started_at >= $2 GROUP BY queue_id",
    )
    .bind(p.tenant_id())
    .bind(now - 3_600_000)
    .fetch_all(&store.pool)
    .await?;
    let mut avg: HashMap<String, i64> = HashMap::new();
    for r in &rows {
        avg.insert(r.try_get("queue_id")?, r.try_get("avg_wait")?);
    }
    Ok(queues
        .iter()
        .map(|q| {
            let (running, waiting) = s.queues.get(&q.id).copied().unwrap_or_default();
            QueueStats {
                queue_id: q.id.clone(),
                name: q.name.clone(),
                group_name: q.group_name.clone(),
                pools: q
                    .pools
                    .iter()
                    .map(|id| s.pool_names.get(id).map_or("?", String::as_str).to_string())
                    .collect(),
                running,
                waiting,
                avg_wait_ms: avg.get(&q.id).copied(),
            }
        })
        .collect())
}

/// The last 20 preemptions the tenant took part in, from either side. Another tenant's group
/// is never named.
pub async fn recent_preemptions(store: &Store, p: &Principal) -> ApiResult<Vec<Preemption>> {
    let rows = sqlx::query(
        "SELECT x.at, x.victim_tenant_id, x.victim_job_id, x.for_tenant_id, x.for_job_id, x.gpu_milli, x.reason,
            COALESCE(pl.name, '?') AS pool_name, vg.name AS victim_group, fg.name AS for_group
         FROM preemptions x LEFT JOIN pools pl ON pl.id = x.pool_id
         LEFT JOIN groups vg ON vg.id = x.victim_group_id LEFT JOIN groups fg ON fg.id = x.for_group_id
         WHERE x.victim_tenant_id = $1 OR x.for_tenant_id = $1 ORDER BY x.at DESC LIMIT 20",
    )
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    let me = p.tenant_id();
    let mut out = Vec::new();
    for r in &rows {
        let vt: String = r.try_get("victim_tenant_id")?;
        let ft: String = r.try_get("for_tenant_id")?;
        let hide = |t: &str, v: Option<String>| {
            if t == me {
                v.unwrap_or_default()
            } else {
                "another organization".to_string()
            }
        };
        out.push(Preemption {
            at: r.try_get("at")?,
            pool_name: r.try_get("pool_name")?,
            victim_job_id: if vt == me {
                r.try_get("victim_job_id")?
            } else {
                String::new()
            },
            victim_group: hide(&vt, r.try_get("victim_group")?),
            for_job_id: if ft == me {
                r.try_get("for_job_id")?
            } else {
                String::new()
            },
            for_group: hide(&ft, r.try_get("for_group")?),
            gpu_milli: r.try_get("gpu_milli")?,
            reason: if vt == me {
                r.try_get("reason")?
            } else {
                "reclaimed reserved GPUs from another organization's over-quota job".into()
            },
        });
    }
    Ok(out)
}

/// The builder portal: queues I may use, my latest jobs, my groups' quota and use.
pub async fn portal(
    store: &Store,
    sched: &SchedulerHandle,
    p: &Principal,
) -> ApiResult<PortalOverview> {
    require(p, Action::SubmitJobs)?;
    let queues = usable_queues(store, p).await?;
    let jobs = list_jobs(
        store,
        p,
        &JobFilter {
            mine: Some(true),
            limit: Some(50),
            ..Default::default()
        },
    )
    .await?
    .items;
    let mine: Vec<String> = sqlx::query_scalar(
        "SELECT group_id FROM memberships WHERE tenant_id = $1 AND user_id = $2",
    )
    .bind(p.tenant_id())
    .bind(p.user_id())
    .fetch_all(&store.pool)
    .await?;
    let s = counts(store, sched).await?;
    let groups = groups_usage(store, p, &s, Some(&mine)).await?;
    // The same until this user's next job is stored (the newest comes first): a double
    // click, or a form posted twice, sends one key twice and creates one job.
    let newest = jobs.first().map(|j| j.id.as_str()).unwrap_or("none");
    let submit_key = format!("portal-{}-after-{newest}", p.user_id());
    Ok(PortalOverview {
        queues,
        jobs,
        groups,
        submit_key,
    })
}
