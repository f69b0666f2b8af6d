//! What the Policy Manager and the builder portal show: capacity per pool (in quota, over
//! quota, idle, reserved), use per group, queue statistics and recent preemptions. Computed
//! from the same snapshot the scheduler decides on, so "over quota" means exactly what the
//! core means by it. A tenant sees every pool it may use, the totals on shared pools (not who
//! else uses them), and only its own groups, queues and jobs.

use std::collections::HashMap;

use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::core;
use super::driver::{load, Loaded};
use super::jobs::{list_jobs, JobFilter};
use crate::http::error::ApiResult;
use crate::http::require;
use crate::policy::{list_pools, list_queues, usable_queues};
use crate::store::Store;

/// Per-group use from a loaded snapshot: (used, over quota, running, waiting), by group id.
fn group_use(l: &Loaded) -> HashMap<String, (i64, i64, i64, i64)> {
    let over = core::over_quota_jobs(&l.snap);
    let mut out: HashMap<String, (i64, i64, i64, i64)> = HashMap::new();
    for (i, r) in l.snap.running.iter().enumerate() {
        let g = &l.groups[l.queue_group[r.queue as usize] as usize];
        let e = out.entry(g.id.clone()).or_default();
        e.0 += r.gpus as i64;
        if over[i] {
            e.1 += r.gpus as i64;
        }
        e.2 += 1;
    }
    for pj in &l.snap.pending {
        let g = &l.groups[l.queue_group[pj.queue as usize] as usize];
        out.entry(g.id.clone()).or_default().3 += 1;
    }
    out
}

async fn groups_usage(
    store: &Store,
    p: &Principal,
    l: &Loaded,
    only: Option<&[String]>,
) -> ApiResult<Vec<GroupUsage>> {
    let uses = group_use(l);
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
        let (used, over, running, waiting) = uses.get(&gid).copied().unwrap_or_default();
        out.push(GroupUsage {
            group_id: gid,
            group_name: r.try_get("name")?,
            reservation_milli: r.try_get("reservation_milli")?,
            limit_milli: r.try_get("limit_milli")?,
            over_quota_weight: r.try_get("over_quota_weight")?,
            over_quota_allowed: r.try_get::<i64, _>("over_quota_allowed")? != 0,
            used_milli: used,
            over_quota_milli: over,
            running,
            waiting,
        });
    }
    Ok(out)
}

/// The Policy Manager's view of the caller's tenant.
pub async fn overview(store: &Store, p: &Principal) -> ApiResult<PolicyOverview> {
    require(p, Action::ViewPolicy)?;
    let now = store.now();
    let l = load(store, now, 0).await?;
    let over = core::over_quota_jobs(&l.snap);
    // Pools: totals over every tenant's jobs (capacity is shared), reservations of ours.
    let mut in_q: HashMap<u32, i64> = HashMap::new();
    let mut over_q: HashMap<u32, i64> = HashMap::new();
    for (i, r) in l.snap.running.iter().enumerate() {
        let m = if over[i] { &mut over_q } else { &mut in_q };
        *m.entry(r.placement.pool).or_default() += r.gpus as i64;
    }
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
        let idx = l
            .pool_ids
            .iter()
            .position(|x| *x == pool.id)
            .map(|i| i as u32);
        let total: i64 = pool.nodes.iter().map(|n| n.gpus as i64 * 1000).sum();
        let in_quota = idx.and_then(|i| in_q.get(&i)).copied().unwrap_or(0);
        let over_quota = idx.and_then(|i| over_q.get(&i)).copied().unwrap_or(0);
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
    let groups = groups_usage(store, p, &l, None).await?;
    let queue_stats = queue_stats(store, p, &l, &queues, now).await?;
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
    l: &Loaded,
    queues: &[Queue],
    now: i64,
) -> ApiResult<Vec<QueueStats>> {
    let mut running: HashMap<&str, i64> = HashMap::new();
    let mut waiting: HashMap<&str, i64> = HashMap::new();
    for j in &l.jobs {
        if j.tenant_id != p.tenant_id() {
            continue;
        }
        let m = if j.state == app::model::JobState::Queued {
            &mut waiting
        } else {
            &mut running
        };
        *m.entry(j.queue_id.as_str()).or_default() += 1;
    }
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
    let pool_names: HashMap<&str, &str> = l
        .pool_ids
        .iter()
        .zip(&l.pool_names)
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    Ok(queues
        .iter()
        .map(|q| QueueStats {
            queue_id: q.id.clone(),
            name: q.name.clone(),
            group_name: q.group_name.clone(),
            pools: q
                .pools
                .iter()
                .map(|id| pool_names.get(id.as_str()).unwrap_or(&"?").to_string())
                .collect(),
            running: running.get(q.id.as_str()).copied().unwrap_or(0),
            waiting: waiting.get(q.id.as_str()).copied().unwrap_or(0),
            avg_wait_ms: avg.get(&q.id).copied(),
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
pub async fn portal(store: &Store, p: &Principal) -> ApiResult<PortalOverview> {
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
    let l = load(store, store.now(), 0).await?;
    let groups = groups_usage(store, p, &l, Some(&mine)).await?;
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
