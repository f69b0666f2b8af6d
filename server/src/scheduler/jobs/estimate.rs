//! Estimated start of the waiting jobs in one queue's order, as Slurm's `squeue --start`: the
//! time by which the running jobs' time limits free the GPUs a waiting job and every job ahead
//! of it in the queue need. On a simulated pool a job's run time is known (`duration_ms`); on
//! the others only its time limit (`max_runtime_ms`) bounds it, and a running job without one
//! makes every later estimate unknown. A job being preempted ends by its abort timeout; while
//! the head of the line reclaims its reservation, so do the other groups' borrowed (over-quota)
//! jobs. The jobs of other queues and the quota phases can start earlier or later than this;
//! it is an estimate, said so on the page.

use std::collections::HashMap;

use sqlx::Row;

use app::model::{Job, Principal};

use crate::http::error::ApiResult;
use crate::policy::get_queue;
use crate::store::Store;

/// How far down the line estimates go: past this many waiting jobs, none is given.
const DEPTH: i64 = 2000;

/// One allocation that ends: when (`None`: not known), and how many milli-GPUs it frees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    pub at: Option<i64>,
    pub milli: i64,
}

/// The estimated start of each waiting job (`line`: id and milli-GPUs, in queue order): the
/// first end time at which the freed milli-GPUs cover the job's and those ahead of it; none
/// once an allocation of unknown end would have to end first, or the running jobs never free
/// enough. `now` bounds every estimate from below.
pub fn estimates(line: &[(String, i64)], ending: &[Ending], now: i64) -> HashMap<String, i64> {
    let mut ends: Vec<Ending> = ending.to_vec();
    // Unknown ends last: they never come.
    ends.sort_by_key(|e| (e.at.is_none(), e.at));
    let mut out = HashMap::new();
    let (mut freed, mut next) = (0i64, 0usize);
    let mut need = 0i64;
    for (id, milli) in line {
        need += milli;
        while freed < need && next < ends.len() && ends[next].at.is_some() {
            freed += ends[next].milli;
            next += 1;
        }
        if freed < need {
            break;
        }
        let at = next
            .checked_sub(1)
            .and_then(|i| ends[i].at)
            .unwrap_or(now)
            .max(now);
        out.insert(id.clone(), at);
    }
    out
}

/// Fills `estimated_start_at` of `items`, a page of queue `queue_id`'s waiting jobs in queue
/// order. The running jobs counted are those in the queue's pools; when the head of the line
/// waits at its group's limit, only that group's (a queue serves one group).
pub async fn fill(
    store: &Store,
    p: &Principal,
    queue_id: &str,
    items: &mut [Job],
) -> ApiResult<()> {
    if items.is_empty() {
        return Ok(());
    }
    let queue = get_queue(store, p, queue_id).await?;
    let rows = sqlx::query(
        "SELECT id, gpu_milli, wait_code FROM jobs WHERE tenant_id = $1 AND queue_id = $2 AND state = 'queued'
         ORDER BY priority DESC, submitted_at ASC, id ASC LIMIT $3",
    )
    .bind(p.tenant_id())
    .bind(queue_id)
    .bind(DEPTH)
    .fetch_all(&store.pool)
    .await?;
    let mut line = Vec::with_capacity(rows.len());
    let mut head = None;
    for (i, r) in rows.iter().enumerate() {
        if i == 0 {
            head = r.try_get::<Option<String>, _>("wait_code")?;
        }
        line.push((
            r.try_get::<String, _>("id")?,
            r.try_get::<i64, _>("gpu_milli")?,
        ));
    }
    let head_at_limit = head.as_deref() == Some("over_limit");
    let reclaiming = head.as_deref() == Some("reclaiming");
    let now = store.now();
    let mut ending = Vec::new();
    for pool in &queue.pools {
        // Live jobs holding GPUs in the pool, of every organization sharing it: only their
        // sizes and end times are read, nothing of them is shown.
        let rows = sqlx::query(
            "SELECT j.gpu_milli, j.group_id, j.state, j.over_quota, j.abort_timeout_ms, j.started_at,
                    j.max_runtime_ms, j.duration_ms, p.executor
             FROM jobs j JOIN pools p ON p.id = j.pool_id
             WHERE j.pool_id = $1 AND j.state IN ('admitted', 'starting', 'running', 'preempting')",
        )
        .bind(pool)
        .fetch_all(&store.pool)
        .await?;
        for r in &rows {
            if head_at_limit && r.try_get::<String, _>("group_id")? != queue.group_id {
                continue;
            }
            let started = r.try_get::<Option<i64>, _>("started_at")?.unwrap_or(now);
            let limit = r.try_get::<Option<i64>, _>("max_runtime_ms")?;
            let known = match r.try_get::<String, _>("executor")?.as_str() {
                "simulated" => match (r.try_get::<Option<i64>, _>("duration_ms")?, limit) {
                    (Some(d), Some(l)) => Some(d.min(l)),
                    (d, l) => d.or(l),
                },
                _ => limit,
            };
            let mut at = known.map(|ms| started.saturating_add(ms));
            // Stopped by the scheduler: gone by its abort timeout at the latest.
            let stop_by = now.saturating_add(r.try_get::<i64, _>("abort_timeout_ms")?.max(0));
            let borrowed = r.try_get::<i64, _>("over_quota")? != 0
                && r.try_get::<String, _>("group_id")? != queue.group_id;
            if r.try_get::<String, _>("state")? == "preempting" || (reclaiming && borrowed) {
                at = Some(at.map_or(stop_by, |a| a.min(stop_by)));
            }
            ending.push(Ending {
                at,
                milli: r.try_get("gpu_milli")?,
            });
        }
    }
    let at = estimates(&line, &ending, now);
    for job in items.iter_mut() {
        job.estimated_start_at = at.get(&job.id).copied();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(sizes: &[i64]) -> Vec<(String, i64)> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, m)| (format!("j{i}"), *m))
            .collect()
    }

    fn end(at: Option<i64>, milli: i64) -> Ending {
        Ending { at, milli }
    }

    #[test]
    fn each_job_starts_when_enough_has_ended_for_it_and_those_ahead() {
        // Two 1-GPU jobs end at 100 and 300, one 2-GPU job at 200.
        let ending = [
            end(Some(300), 1000),
            end(Some(100), 1000),
            end(Some(200), 2000),
        ];
        let got = estimates(&line(&[1000, 2000, 1000, 1000]), &ending, 50);
        assert_eq!(got["j0"], 100);
        assert_eq!(got["j1"], 200, "3 GPUs freed by 200");
        assert_eq!(got["j2"], 300);
        assert!(!got.contains_key("j3"), "nothing more ends: unknown");
    }

    #[test]
    fn an_allocation_without_an_end_stops_the_estimates_behind_it() {
        let ending = [end(Some(100), 1000), end(None, 4000), end(Some(900), 1000)];
        let got = estimates(&line(&[1000, 1000, 1000]), &ending, 0);
        assert_eq!(got["j0"], 100);
        assert_eq!(got["j1"], 900);
        assert!(!got.contains_key("j2"));
    }

    #[test]
    fn an_estimate_is_never_in_the_past() {
        let got = estimates(&line(&[500]), &[end(Some(10), 1000)], 1000);
        assert_eq!(got["j0"], 1000);
    }
}
