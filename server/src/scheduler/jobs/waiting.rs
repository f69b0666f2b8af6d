//! "Why is my job waiting": what a queued job's detail adds to its wait reason. Its place in
//! its queue, its group's use against reservation, limit and weighted fair share, who borrows
//! on its queue's pools, and the jobs being stopped for it. Read from the store when asked
//! (the wait reason itself is the scheduler's, stored with the job).

use std::collections::HashMap;

use sqlx::Row;

use app::model::{Borrower, Job, PoolNode, Principal, Waiting, WHOLE_GPU_MILLI};

use crate::http::error::ApiResult;
use crate::store::Store;

/// The states in which a job holds GPUs.
const HOLDING: &str = "('admitted', 'starting', 'running', 'preempting')";

pub(super) async fn waiting(store: &Store, p: &Principal, job: &Job) -> ApiResult<Waiting> {
    let me = p.tenant_id();
    let row = sqlx::query("SELECT priority FROM jobs WHERE tenant_id = $1 AND id = $2")
        .bind(me)
        .bind(&job.id)
        .fetch_one(&store.pool)
        .await?;
    let priority: i64 = row.try_get("priority")?;
    // The scheduler's order within a queue: priority (high first), then submit time.
    let position: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM jobs WHERE queue_id = $1 AND state = 'queued'
           AND (priority > $2 OR (priority = $2 AND (submitted_at < $3 OR (submitted_at = $3 AND id < $4))))",
    )
    .bind(&job.queue_id)
    .bind(priority)
    .bind(job.submitted_at)
    .bind(&job.id)
    .fetch_one(&store.pool)
    .await?;
    let queue_waiting: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE queue_id = $1 AND state = 'queued'")
            .bind(&job.queue_id)
            .fetch_one(&store.pool)
            .await?;

    let group = sqlx::query(
        "SELECT g.name, pl.reservation_milli, pl.limit_milli, pl.over_quota_weight, pl.over_quota_allowed, q.pools
         FROM queues q JOIN policies pl ON pl.id = q.policy_id JOIN groups g ON g.id = pl.group_id
         WHERE q.tenant_id = $1 AND q.id = $2",
    )
    .bind(me)
    .bind(&job.queue_id)
    .fetch_one(&store.pool)
    .await?;
    let use_row = sqlx::query(&format!(
        "SELECT CAST(COALESCE(SUM(gpu_milli), 0) AS BIGINT) AS used,
                CAST(COALESCE(SUM(CASE WHEN over_quota <> 0 THEN gpu_milli ELSE 0 END), 0) AS BIGINT) AS over
         FROM jobs WHERE tenant_id = $1 AND group_id = $2 AND state IN {HOLDING}"
    ))
    .bind(me)
    .bind(&job.group_id)
    .fetch_one(&store.pool)
    .await?;
    let pools: Vec<String> =
        serde_json::from_str(&group.try_get::<String, _>("pools")?).unwrap_or_default();

    // Borrowers on the queue's pools, by group; another tenant's groups are not named.
    let mut borrowers: HashMap<String, i64> = HashMap::new();
    for pool in &pools {
        let rows = sqlx::query(&format!(
            "SELECT j.tenant_id, g.name, CAST(SUM(j.gpu_milli) AS BIGINT) AS milli FROM jobs j JOIN groups g ON g.id = j.group_id
             WHERE j.pool_id = $1 AND j.over_quota <> 0 AND j.state IN {HOLDING} GROUP BY j.tenant_id, g.name"
        ))
        .bind(pool)
        .fetch_all(&store.pool)
        .await?;
        for r in rows {
            let tenant: String = r.try_get("tenant_id")?;
            let name = if tenant == me {
                r.try_get("name")?
            } else {
                "another organization".to_string()
            };
            *borrowers.entry(name).or_default() += r.try_get::<i64, _>("milli")?;
        }
    }
    let mut borrowers: Vec<Borrower> = borrowers
        .into_iter()
        .map(|(group_name, gpu_milli)| Borrower {
            group_name,
            gpu_milli,
        })
        .collect();
    borrowers.sort_by(|a, b| {
        b.gpu_milli
            .cmp(&a.gpu_milli)
            .then(a.group_name.cmp(&b.group_name))
    });

    // Jobs stopping for it (preemptions since it last entered the queue).
    let rows = sqlx::query(
        "SELECT v.tenant_id, v.name FROM preemptions x JOIN jobs v ON v.id = x.victim_job_id
         WHERE x.for_job_id = $1 AND x.at >= $2 AND v.state = 'preempting' ORDER BY v.name",
    )
    .bind(&job.id)
    .bind(job.queued_at)
    .fetch_all(&store.pool)
    .await?;
    let victims = rows
        .iter()
        .map(|r| {
            let tenant: String = r.try_get("tenant_id")?;
            Ok(if tenant == me {
                r.try_get("name")?
            } else {
                "a job of another organization".to_string()
            })
        })
        .collect::<Result<Vec<String>, sqlx::Error>>()?;

    let weight: i64 = group.try_get("over_quota_weight")?;
    let allowed = group.try_get::<i64, _>("over_quota_allowed")? != 0;
    Ok(Waiting {
        position: position + 1,
        queue_waiting,
        gpu_milli: job.gpu_milli,
        group_name: group.try_get("name")?,
        group_used_milli: use_row.try_get("used")?,
        group_over_quota_milli: use_row.try_get("over")?,
        group_reservation_milli: group.try_get("reservation_milli")?,
        group_limit_milli: group.try_get("limit_milli")?,
        group_fair_share_milli: if allowed && weight > 0 {
            fair_share(store, &job.group_id, weight).await?
        } else {
            0
        },
        borrowers,
        victims,
    })
}

/// The scheduler's weighted fair share (see `core`'s "Fair share"): the GPUs of all pools
/// beyond all reservations, split by over-quota weight among the groups that borrow now, and
/// this one.
async fn fair_share(store: &Store, group_id: &str, weight: i64) -> ApiResult<i64> {
    let mut capacity: i64 = 0;
    for r in sqlx::query("SELECT nodes FROM pools")
        .fetch_all(&store.pool)
        .await?
    {
        let nodes: Vec<PoolNode> =
            serde_json::from_str(&r.try_get::<String, _>("nodes")?).unwrap_or_default();
        capacity += nodes.iter().map(|n| n.gpus as i64).sum::<i64>() * WHOLE_GPU_MILLI;
    }
    let reserved: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(reservation_milli), 0) AS BIGINT) FROM policies",
    )
    .fetch_one(&store.pool)
    .await?;
    let others: i64 = sqlx::query_scalar(&format!(
        "SELECT CAST(COALESCE(SUM(pl.over_quota_weight), 0) AS BIGINT) FROM policies pl
         WHERE pl.group_id <> $1 AND pl.over_quota_allowed <> 0 AND EXISTS
           (SELECT 1 FROM jobs j WHERE j.group_id = pl.group_id AND j.over_quota <> 0 AND j.state IN {HOLDING})"
    ))
    .bind(group_id)
    .fetch_one(&store.pool)
    .await?;
    let spare = (capacity - reserved).max(0);
    Ok(spare * weight / (weight + others))
}
