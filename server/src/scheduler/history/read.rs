//! `GET /api/v1/scheduling/history`: the samples of a window added up per series and bucket
//! by the store, averaged here ([`super::buckets`]), and scoped to the caller:
//! - a tenant admin: the pools its tenant may use (a shared pool's numbers are every tenant's
//!   together, as the Policy Manager shows them), its groups and its queues;
//! - a member: only its groups and their queues (no pools);
//! - a platform admin: as the admin of its own tenant, and on each shared pool every tenant's
//!   use and grant, never their groups or queues.

use std::collections::{BTreeMap, HashMap};

use sqlx::Row;

use app::access::Action;
use app::model::*;

use super::buckets::{mean, mean_count, percentiles, Grid, Sums};
use super::Series;
use crate::http::error::ApiResult;
use crate::http::require;
use crate::store::Store;

/// What the store adds up per series and bucket (see [`Sums`]).
const SUMS: &str = "COUNT(*) AS n, CAST(SUM(in_quota_milli) AS BIGINT) AS in_quota, CAST(SUM(over_quota_milli) AS BIGINT) AS over_quota,
    CAST(SUM(idle_milli) AS BIGINT) AS idle, CAST(SUM(reserved_milli) AS BIGINT) AS reserved, CAST(SUM(waiting) AS BIGINT) AS waiting,
    CAST(SUM(running) AS BIGINT) AS running, CAST(SUM(started) AS BIGINT) AS started,
    CAST(SUM(wait_p50_ms * started) AS BIGINT) AS p50_weighted, MAX(wait_p90_ms) AS p90, MAX(wait_p99_ms) AS p99";

/// Whose rows a query reads, with the parameters its clause binds after `$1..$3` (the grid).
enum Scope<'a> {
    /// Shared pools and the tenant's own (`$4`).
    Pools { tenant: &'a str },
    /// Every tenant's use of the shared pools (platform admins).
    Tenants,
    /// The tenant's (`$4`) groups or queues: all of them (`$5` = 1) or those of the user's
    /// (`$6`) groups.
    Groups {
        tenant: &'a str,
        all: bool,
        user: &'a str,
    },
}

impl Scope<'_> {
    fn clause(&self) -> &'static str {
        match self {
            Scope::Pools { .. } => "AND (tenant_id IS NULL OR tenant_id = $4)",
            Scope::Tenants => "",
            Scope::Groups { .. } => {
                "AND tenant_id = $4 AND ($5 = 1 OR group_id IN (SELECT group_id FROM memberships WHERE tenant_id = $4 AND user_id = $6))"
            }
        }
    }
}

/// One series' sums by bucket, by its key columns' values.
type BySeries = BTreeMap<Vec<String>, HashMap<usize, (i64, Sums)>>;

/// The rows of `series` in the grid, added up per key and bucket.
async fn sums(
    store: &Store,
    grid: &Grid,
    series: Series,
    keys: &[&str],
    scope: Scope<'_>,
) -> ApiResult<BySeries> {
    let key_cols: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("COALESCE({k}, '') AS k{i}"))
        .collect();
    let group_by: Vec<String> = (1..=keys.len() + 1).map(|i| i.to_string()).collect();
    let sql = format!(
        "SELECT {}, (at - $1) / $2 AS bucket, {SUMS} FROM scheduling_samples
         WHERE kind = '{}' AND at >= $1 AND at < $3 {} GROUP BY {}",
        key_cols.join(", "),
        series.as_str(),
        scope.clause(),
        group_by.join(", ")
    );
    let mut q = sqlx::query(&sql)
        .bind(grid.from)
        .bind(grid.bucket_ms)
        .bind(grid.end());
    match scope {
        Scope::Pools { tenant } => q = q.bind(tenant.to_string()),
        Scope::Tenants => {}
        Scope::Groups { tenant, all, user } => {
            q = q
                .bind(tenant.to_string())
                .bind(i64::from(all))
                .bind(user.to_string())
        }
    }
    let mut out = BySeries::new();
    for r in q.fetch_all(&store.pool).await? {
        let key = (0..keys.len())
            .map(|i| r.try_get::<String, _>(format!("k{i}").as_str()))
            .collect::<Result<Vec<_>, _>>()?;
        let bucket: i64 = r.try_get("bucket")?;
        let Some(bucket) = usize::try_from(bucket).ok().filter(|b| *b < grid.count) else {
            continue;
        };
        let s = Sums {
            in_quota_milli: r.try_get("in_quota")?,
            over_quota_milli: r.try_get("over_quota")?,
            idle_milli: r.try_get("idle")?,
            reserved_milli: r.try_get("reserved")?,
            waiting: r.try_get("waiting")?,
            running: r.try_get("running")?,
            started: r.try_get("started")?,
            p50_weighted: r.try_get::<Option<i64>, _>("p50_weighted")?.unwrap_or(0),
            p90_max: r.try_get("p90")?,
            p99_max: r.try_get("p99")?,
        };
        out.entry(key)
            .or_default()
            .insert(bucket, (r.try_get("n")?, s));
    }
    Ok(out)
}

/// One point per bucket: `None` where the bucket has no sample set, else `point` of the
/// series' sums (zero where it had no row) and the sets to divide them by.
fn points<T>(
    sets: &[i64],
    by_bucket: &HashMap<usize, (i64, Sums)>,
    point: impl Fn(&Sums, i64) -> T,
) -> Vec<Option<T>> {
    sets.iter()
        .enumerate()
        .map(|(i, &n)| {
            let (rows, s) = by_bucket.get(&i).copied().unwrap_or_default();
            // Every row belongs to a set; should a marker be missing, the rows still count.
            let divisor = n.max(rows);
            (divisor > 0).then(|| point(&s, divisor))
        })
        .collect()
}

fn allocation(s: &Sums, sets: i64) -> AllocationPoint {
    AllocationPoint {
        in_quota_milli: mean(s.in_quota_milli, sets).unwrap_or(0),
        over_quota_milli: mean(s.over_quota_milli, sets).unwrap_or(0),
        idle_milli: mean(s.idle_milli, sets).unwrap_or(0),
    }
}

/// The sample sets in each bucket, and the newest generated one in the window.
async fn sets(store: &Store, grid: &Grid) -> ApiResult<(Vec<i64>, Option<i64>)> {
    let rows = sqlx::query(
        "SELECT (at - $1) / $2 AS bucket, COUNT(*) AS n, MAX(CASE WHEN generated <> 0 THEN at END) AS generated_at
         FROM scheduling_samples WHERE kind = 'set' AND at >= $1 AND at < $3 GROUP BY 1",
    )
    .bind(grid.from)
    .bind(grid.bucket_ms)
    .bind(grid.end())
    .fetch_all(&store.pool)
    .await?;
    let mut sets = vec![0i64; grid.count];
    let mut generated: Option<i64> = None;
    for r in &rows {
        let bucket: i64 = r.try_get("bucket")?;
        if let Some(slot) = usize::try_from(bucket).ok().and_then(|b| sets.get_mut(b)) {
            *slot = r.try_get("n")?;
        }
        if let Some(at) = r.try_get::<Option<i64>, _>("generated_at")? {
            generated = generated.max(Some(at));
        }
    }
    Ok((sets, generated))
}

/// Names by id from a two-column query (`id`, `name`).
async fn names(
    store: &Store,
    sql: &str,
    tenant: Option<&str>,
) -> ApiResult<HashMap<String, String>> {
    let mut q = sqlx::query(sql);
    if let Some(t) = tenant {
        q = q.bind(t.to_string());
    }
    let mut out = HashMap::new();
    for r in q.fetch_all(&store.pool).await? {
        out.insert(r.try_get("id")?, r.try_get("name")?);
    }
    Ok(out)
}

const DELETED: &str = "(deleted)";

/// The query of `GET /api/v1/scheduling/history`.
#[derive(Clone, Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// `hour` (the default; one-minute buckets), `day` (fifteen-minute buckets) or `week`
    /// (two-hour buckets).
    #[param(pattern = "^(hour|day|week)$")]
    pub window: Option<String>,
}

/// The caller's history over `window`, as of `now`.
pub async fn history(
    store: &Store,
    p: &Principal,
    window: HistoryWindow,
    now: i64,
) -> ApiResult<History> {
    require(p, Action::SubmitJobs)?;
    let grid = Grid::new(now, window.bucket_ms(), window.bucket_count());
    let tenant = p.tenant_id();
    let admin = p.me.is_tenant_admin || p.me.is_platform_admin;
    let (sets, generated_until) = sets(store, &grid).await?;

    let mut pools = Vec::new();
    if admin {
        let pool_names = names(store, "SELECT id, name FROM pools", None).await?;
        let mut by_pool: HashMap<String, Vec<TenantAllocation>> = HashMap::new();
        if p.me.is_platform_admin {
            let tenant_names = names(store, "SELECT id, name FROM tenants", None).await?;
            let rows = sums(
                store,
                &grid,
                Series::TenantPool,
                &["pool_id", "tenant_id"],
                Scope::Tenants,
            )
            .await?;
            for (key, by_bucket) in &rows {
                by_pool
                    .entry(key[0].clone())
                    .or_default()
                    .push(TenantAllocation {
                        tenant_id: key[1].clone(),
                        tenant_name: tenant_names
                            .get(&key[1])
                            .map_or(DELETED, String::as_str)
                            .to_string(),
                        points: points(&sets, by_bucket, |s, n| TenantPoint {
                            in_quota_milli: mean(s.in_quota_milli, n).unwrap_or(0),
                            over_quota_milli: mean(s.over_quota_milli, n).unwrap_or(0),
                            granted_milli: mean(s.reserved_milli, n).unwrap_or(0),
                        }),
                    });
            }
        }
        let rows = sums(
            store,
            &grid,
            Series::Pool,
            &["pool_id", "tenant_id"],
            Scope::Pools { tenant },
        )
        .await?;
        for (key, by_bucket) in &rows {
            let shared = key[1].is_empty();
            let mut tenants = if shared {
                by_pool.remove(&key[0]).unwrap_or_default()
            } else {
                Vec::new()
            };
            tenants.sort_by(|a, b| a.tenant_name.cmp(&b.tenant_name));
            pools.push(PoolHistory {
                pool_id: key[0].clone(),
                name: pool_names
                    .get(&key[0])
                    .map_or(DELETED, String::as_str)
                    .to_string(),
                shared,
                points: points(&sets, by_bucket, allocation),
                tenants,
            });
        }
        pools.sort_by(|a, b| a.name.cmp(&b.name));
    }

    let scope = || Scope::Groups {
        tenant,
        all: admin,
        user: p.user_id(),
    };
    let group_names = names(
        store,
        "SELECT id, name FROM groups WHERE tenant_id = $1",
        Some(tenant),
    )
    .await?;
    let mut groups: Vec<GroupHistory> = sums(store, &grid, Series::Group, &["group_id"], scope())
        .await?
        .iter()
        .map(|(key, by_bucket)| GroupHistory {
            group_id: key[0].clone(),
            name: group_names
                .get(&key[0])
                .map_or(DELETED, String::as_str)
                .to_string(),
            points: points(&sets, by_bucket, |s, n| GroupPoint {
                in_quota_milli: mean(s.in_quota_milli, n).unwrap_or(0),
                over_quota_milli: mean(s.over_quota_milli, n).unwrap_or(0),
                unused_reservation_milli: mean(s.idle_milli, n).unwrap_or(0),
                running: mean_count(s.running, n).unwrap_or(0.0),
                waiting: mean_count(s.waiting, n).unwrap_or(0.0),
            }),
        })
        .collect();
    groups.sort_by(|a, b| a.name.cmp(&b.name));

    let queue_rows = sqlx::query(
        "SELECT q.id, q.name, g.name AS group_name FROM queues q JOIN policies pl ON pl.id = q.policy_id
         JOIN groups g ON g.id = pl.group_id WHERE q.tenant_id = $1",
    )
    .bind(tenant)
    .fetch_all(&store.pool)
    .await?;
    let mut queue_names: HashMap<String, (String, String)> = HashMap::new();
    for r in &queue_rows {
        queue_names.insert(
            r.try_get("id")?,
            (r.try_get("name")?, r.try_get("group_name")?),
        );
    }
    let mut queues: Vec<QueueHistory> = sums(store, &grid, Series::Queue, &["queue_id"], scope())
        .await?
        .iter()
        .map(|(key, by_bucket)| {
            let (name, group_name) = queue_names
                .get(&key[0])
                .cloned()
                .unwrap_or_else(|| (DELETED.to_string(), String::new()));
            QueueHistory {
                queue_id: key[0].clone(),
                name,
                group_name,
                points: points(&sets, by_bucket, |s, n| {
                    let (p50, p90, p99) = percentiles(s);
                    QueuePoint {
                        waiting: mean_count(s.waiting, n).unwrap_or(0.0),
                        running: mean_count(s.running, n).unwrap_or(0.0),
                        started: s.started,
                        wait_p50_ms: p50,
                        wait_p90_ms: p90,
                        wait_p99_ms: p99,
                    }
                }),
            }
        })
        .collect();
    queues.sort_by(|a, b| (&a.group_name, &a.name).cmp(&(&b.group_name, &b.name)));

    Ok(History {
        window,
        bucket_ms: grid.bucket_ms,
        buckets: grid.starts(),
        samples: sets,
        generated_until,
        pools,
        groups,
        queues,
    })
}
