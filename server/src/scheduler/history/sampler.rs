//! The sampler: beside the scheduler's driver, once every `history_sample_ms` (a minute by
//! default), it writes one sample set from the counts the driver published ([`Summary`]) and
//! prunes the sets older than [`RETENTION_MS`](super::RETENTION_MS), in one transaction.
//!
//! Only the leader writes: a driver publishes its summary only while it holds the leadership
//! (on PostgreSQL, the advisory lock), and withdraws it when it loses it, so a standby
//! replica's sampler finds none and skips its turn. For the second or so in which a replica
//! that lost the lock has not noticed yet, two sets may be written; each is a true count of its
//! moment, and the averages barely move.
//!
//! Sets are stamped with the start of their interval on the store's clock (`:00`, `:01`, …), so
//! each one-minute bucket of the hour's chart holds one set. The waits are those of the jobs
//! that started since the set before (`[previous, at)`), each job counted in one set.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::Row;
use tokio::task::{AbortHandle, JoinHandle};

use app::model::PoolNode;

use super::buckets::nearest_rank;
use super::{prune, write, SampleRow, SampleSet, Series, RETENTION_MS};
use crate::scheduler::driver::{DriverConfig, SchedulerHandle, Summary};
use crate::store::Store;

/// The states in which a job holds GPUs.
const HOLDING: &str = "('admitted', 'starting', 'running', 'preempting')";

/// Starts the sampler for the driver `driver` (of `store`, publishing through `handle`, with
/// the scheduler's settings `config`) and hands the driver back: the sampler stops when the
/// driver's task ends (or is aborted).
pub fn beside(
    store: &Store,
    handle: &SchedulerHandle,
    config: &DriverConfig,
    driver: JoinHandle<()>,
) -> JoinHandle<()> {
    let sampler = Sampler {
        store: store.clone(),
        handle: handle.clone(),
        interval_ms: config.history_sample_ms.max(10),
        driver: driver.abort_handle(),
        last_at: None,
    };
    tokio::spawn(sampler.run());
    driver
}

struct Sampler {
    store: Store,
    handle: SchedulerHandle,
    interval_ms: i64,
    driver: AbortHandle,
    /// The last set this sampler wrote.
    last_at: Option<i64>,
}

impl Sampler {
    async fn run(mut self) {
        let iv = self.interval_ms;
        loop {
            // Until the next multiple of the interval, watching the driver meanwhile.
            let now = self.store.now();
            let next = (now.div_euclid(iv) + 1) * iv;
            let mut left = Duration::from_millis((next - now).max(1) as u64);
            while !left.is_zero() {
                if self.driver.is_finished() {
                    return;
                }
                let step = left.min(Duration::from_millis(500));
                tokio::time::sleep(step).await;
                left -= step;
            }
            if self.driver.is_finished() {
                return;
            }
            if let Err(e) = self.sample().await {
                tracing::warn!(error = %e, "history: taking a sample failed");
            }
        }
    }

    async fn sample(&mut self) -> Result<(), sqlx::Error> {
        let iv = self.interval_ms;
        let at = self.store.now().div_euclid(iv) * iv;
        if self.last_at.is_some_and(|last| at <= last) {
            return Ok(());
        }
        let Some(summary) = self.handle.summary(&self.store).await else {
            // Not leading (or the driver is stuck): another replica samples, or nobody
            // should. The next set's waits start afresh.
            self.last_at = None;
            return Ok(());
        };
        let since = self.last_at.unwrap_or(at - iv);
        let rows = rows(&self.store, &summary, since, at).await?;
        let mut tx = self.store.begin_write().await?;
        write(
            &mut tx,
            &[SampleSet {
                at,
                generated: false,
                rows,
            }],
        )
        .await?;
        let pruned = prune(&mut tx, at - RETENTION_MS).await?;
        tx.commit().await?;
        if pruned > 0 {
            tracing::debug!(rows = pruned, "history: pruned old samples");
        }
        self.last_at = Some(at);
        Ok(())
    }
}

/// A sample set's rows: the summary's counts, with the pools' capacity, the groups'
/// reservations, each tenant's use and grant on shared pools, and the waits of the jobs that
/// started in `[since, at)`.
pub(super) async fn rows(
    store: &Store,
    s: &Summary,
    since: i64,
    at: i64,
) -> Result<Vec<SampleRow>, sqlx::Error> {
    let mut out = Vec::new();
    let pools = sqlx::query("SELECT id, owner_tenant_id, nodes FROM pools")
        .fetch_all(&store.pool)
        .await?;
    for r in &pools {
        let id: String = r.try_get("id")?;
        let nodes: Vec<PoolNode> =
            serde_json::from_str(&r.try_get::<String, _>("nodes")?).unwrap_or_default();
        let total: i64 = nodes.iter().map(|n| i64::from(n.gpus) * 1000).sum();
        let (in_quota, over_quota) = s.pools.get(&id).copied().unwrap_or_default();
        out.push(SampleRow {
            tenant_id: r.try_get("owner_tenant_id")?,
            pool_id: Some(id),
            in_quota_milli: in_quota,
            over_quota_milli: over_quota,
            idle_milli: (total - in_quota - over_quota).max(0),
            ..SampleRow::new(Series::Pool)
        });
    }

    let policies = sqlx::query("SELECT group_id, tenant_id, reservation_milli FROM policies")
        .fetch_all(&store.pool)
        .await?;
    for r in &policies {
        let group: String = r.try_get("group_id")?;
        let reservation: i64 = r.try_get("reservation_milli")?;
        let u = s.groups.get(&group).copied().unwrap_or_default();
        let in_quota = u.used_milli - u.over_quota_milli;
        out.push(SampleRow {
            tenant_id: Some(r.try_get("tenant_id")?),
            group_id: Some(group),
            in_quota_milli: in_quota,
            over_quota_milli: u.over_quota_milli,
            idle_milli: (reservation - in_quota).max(0),
            reserved_milli: reservation,
            running: u.running,
            waiting: u.waiting,
            ..SampleRow::new(Series::Group)
        });
    }

    // The waits of the jobs that started in [since, at), by queue.
    let started = sqlx::query(
        "SELECT queue_id, started_at - queued_at AS waited FROM jobs
         WHERE tenant_id IN (SELECT id FROM tenants) AND started_at >= $1 AND started_at < $2",
    )
    .bind(since)
    .bind(at)
    .fetch_all(&store.pool)
    .await?;
    let mut waits: HashMap<String, Vec<i64>> = HashMap::new();
    for r in &started {
        let waited: i64 = r.try_get("waited")?;
        waits
            .entry(r.try_get("queue_id")?)
            .or_default()
            .push(waited.max(0));
    }
    let queues = sqlx::query(
        "SELECT q.id, q.tenant_id, pl.group_id FROM queues q JOIN policies pl ON pl.id = q.policy_id",
    )
    .fetch_all(&store.pool)
    .await?;
    for r in &queues {
        let id: String = r.try_get("id")?;
        let (running, waiting) = s.queues.get(&id).copied().unwrap_or_default();
        let mut w = waits.remove(&id).unwrap_or_default();
        w.sort_unstable();
        out.push(SampleRow {
            tenant_id: Some(r.try_get("tenant_id")?),
            group_id: Some(r.try_get("group_id")?),
            queue_id: Some(id),
            running,
            waiting,
            started: w.len() as i64,
            wait_p50_ms: nearest_rank(&w, 50),
            wait_p90_ms: nearest_rank(&w, 90),
            wait_p99_ms: nearest_rank(&w, 99),
            ..SampleRow::new(Series::Queue)
        });
    }

    // Each tenant's use of the shared pools (as admitted: within or beyond its groups'
    // reservations), and its grant there.
    let mut tenants: HashMap<(String, String), SampleRow> = HashMap::new();
    let used = sqlx::query(&format!(
        "SELECT j.tenant_id, j.pool_id,
                CAST(SUM(CASE WHEN j.over_quota <> 0 THEN 0 ELSE j.gpu_milli END) AS BIGINT) AS in_quota,
                CAST(SUM(CASE WHEN j.over_quota <> 0 THEN j.gpu_milli ELSE 0 END) AS BIGINT) AS over_quota
         FROM jobs j JOIN pools p ON p.id = j.pool_id
         WHERE p.owner_tenant_id IS NULL AND j.state IN {HOLDING} GROUP BY j.tenant_id, j.pool_id"
    ))
    .fetch_all(&store.pool)
    .await?;
    let grants = sqlx::query("SELECT tenant_id, pool_id, reservation_milli FROM pool_grants")
        .fetch_all(&store.pool)
        .await?;
    for r in &used {
        let row = tenant_row(&mut tenants, r.try_get("tenant_id")?, r.try_get("pool_id")?);
        row.in_quota_milli = r.try_get("in_quota")?;
        row.over_quota_milli = r.try_get("over_quota")?;
    }
    for r in &grants {
        let row = tenant_row(&mut tenants, r.try_get("tenant_id")?, r.try_get("pool_id")?);
        row.reserved_milli = r.try_get("reservation_milli")?;
    }
    let mut tenants: Vec<SampleRow> = tenants.into_values().collect();
    tenants.sort_by(|a, b| (&a.pool_id, &a.tenant_id).cmp(&(&b.pool_id, &b.tenant_id)));
    out.extend(tenants);
    Ok(out)
}

/// The tenant-on-shared-pool row of `tenant` and `pool`, made on first use.
fn tenant_row(
    rows: &mut HashMap<(String, String), SampleRow>,
    tenant: String,
    pool: String,
) -> &mut SampleRow {
    rows.entry((tenant.clone(), pool.clone()))
        .or_insert_with(|| SampleRow {
            tenant_id: Some(tenant),
            pool_id: Some(pool),
            ..SampleRow::new(Series::TenantPool)
        })
}
