//! The multi-row statements the driver writes with: admissions, `running` transitions and
//! job events, many rows per statement.

use super::*;

/// One `job_events` row waiting for a multi-row insert.
pub(super) struct EventRow {
    pub(super) tenant_id: String,
    pub(super) job_id: String,
    pub(super) from: Option<JobState>,
    pub(super) to: JobState,
    pub(super) detail: String,
}

/// One admission's new columns.
pub(super) struct AdmitRow {
    pub(super) id: String,
    pub(super) pool_id: String,
    pub(super) node: i64,
    pub(super) node_name: String,
    pub(super) slices: String,
    pub(super) over_quota: i64,
}

/// Marks queued jobs admitted and `starting` in multi-row `UPDATE … FROM (VALUES …)` statements; returns
/// the ids that were still queued (and so changed).
pub(super) async fn admit_rows(
    tx: &mut WriteTx,
    now: i64,
    rows: &[AdmitRow],
) -> Result<std::collections::HashSet<String>, sqlx::Error> {
    let mut changed = std::collections::HashSet::new();
    let d = tx.dialect;
    for chunk in rows.chunks(d.statement_params() / 7) {
        let sql = admit_sql(d, chunk.len());
        let mut q = sqlx::query(&sql).bind(now).bind(now);
        for r in chunk {
            q = q
                .bind(&r.id)
                .bind(&r.pool_id)
                .bind(r.node)
                .bind(&r.node_name)
                .bind(&r.slices)
                .bind(r.over_quota)
                .bind(JobState::Queued.as_str());
        }
        for row in q.fetch_all(&mut *tx.tx).await? {
            changed.insert(row.try_get::<String, _>("id")?);
        }
    }
    Ok(changed)
}

/// The admission statement for `n` rows: `now` twice, then per row id, pool, node, node
/// name, slices, over-quota flag and the state it leaves (`queued`).
///
/// The state each row must still be in comes with the row (`jobs.state = v.column7`), not as
/// a constant, as in the driver's other multi-row statements. PostgreSQL plans a constant
/// condition from the statistics of `jobs`, and between two renewals (the driver has them
/// renewed beside its cycles, `live.rs`) they may say that almost no job is `queued` while
/// thousands are: it then reads every queued job through an index of states (or of queued
/// jobs) and joins them to the rows by a nested loop, a statement whose cost grows with all
/// the waiting jobs. Compared
/// with the row's own value the condition is a join condition, and each row is found by its id.
pub(super) fn admit_sql(d: Dialect, n: usize) -> String {
    format!(
        "UPDATE jobs SET state = 'starting', pool_id = v.column2, node = v.column3, node_name = v.column4, slices = v.column5, over_quota = v.column6,
            admitted_at = {}, wait_code = NULL, wait_reason = NULL, updated_at = {}, {}
         FROM (VALUES {}) AS v
         WHERE jobs.id = v.column1 AND jobs.state = v.column7 AND jobs.stop_reason IS NULL RETURNING id",
        d.param(1),
        d.param(2),
        set_change(d),
        d.rows(3, n, 7, None)
    )
}

/// The statement that writes `n` waiting jobs' reasons: per row id, code, words and the state
/// it must still be in (`queued`), compared with the row's own value for the reason given at
/// [`admit_sql`].
pub(super) fn wait_sql(d: Dialect, n: usize) -> String {
    format!(
        "UPDATE jobs SET wait_code = v.column2, wait_reason = v.column3 FROM (VALUES {}) AS v
         WHERE jobs.id = v.column1 AND jobs.state = v.column4",
        d.rows(1, n, 4, None)
    )
}

/// Writes the `running` transitions gathered so far (job id, handle, state it leaves).
/// Returns a job that was no longer in the state it leaves (another writer changed it since
/// it was read), if any: the caller starts over.
pub(super) async fn flush_running(
    tx: &mut WriteTx,
    now: i64,
    pending: &mut Vec<(String, String, JobState)>,
) -> Result<Option<String>, sqlx::Error> {
    let d = tx.dialect;
    for chunk in pending.chunks(d.statement_params() / 3) {
        let sql = format!(
            "UPDATE jobs SET state = 'running', handle = v.column2, started_at = {}, updated_at = {}, {}
             FROM (VALUES {}) AS v WHERE jobs.id = v.column1 AND jobs.state = v.column3 RETURNING id",
            d.param(1),
            d.param(2),
            set_change(d),
            d.rows(3, chunk.len(), 3, None)
        );
        let mut q = sqlx::query(&sql).bind(now).bind(now);
        for (id, handle, from) in chunk {
            q = q.bind(id).bind(handle).bind(from.as_str());
        }
        let changed: std::collections::HashSet<String> = q
            .fetch_all(&mut *tx.tx)
            .await?
            .iter()
            .map(|r| r.try_get::<String, _>("id"))
            .collect::<Result<_, _>>()?;
        if let Some((id, _, _)) = chunk.iter().find(|(id, _, _)| !changed.contains(id)) {
            return Ok(Some(id.clone()));
        }
    }
    pending.clear();
    Ok(None)
}

pub(super) async fn insert_events(
    tx: &mut WriteTx,
    at: i64,
    rows: &[EventRow],
) -> Result<(), sqlx::Error> {
    for chunk in rows.chunks(tx.dialect.statement_params() / 7) {
        let values = tx.dialect.rows(1, chunk.len(), 7, None);
        let sql = format!("INSERT INTO job_events (id, tenant_id, job_id, at, from_state, to_state, detail) VALUES {values}");
        let mut q = sqlx::query(&sql);
        for r in chunk {
            q = q
                .bind(new_id())
                .bind(r.tenant_id.clone())
                .bind(r.job_id.clone())
                .bind(at)
                .bind(r.from.map(JobState::as_str))
                .bind(r.to.as_str())
                .bind(r.detail.clone());
        }
        q.execute(&mut *tx.tx).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value bound to a statement under test.
    #[derive(Clone, Copy)]
    enum V {
        Int(i64),
        Text(&'static str),
    }

    /// The plan of `sql` for three jobs (`q1` to `q3`): `leading` bound first, then each job's
    /// id and `per_row`, as the driver binds them.
    async fn plan(store: &Store, sql: &str, leading: &[V], per_row: &[V]) -> String {
        let text = format!("EXPLAIN {sql}");
        let mut explain = sqlx::query(&text);
        let ids = ["q1", "q2", "q3"];
        let values = leading.iter().copied().chain(
            ids.iter()
                .flat_map(|id| std::iter::once(V::Text(id)).chain(per_row.iter().copied())),
        );
        for v in values {
            explain = match v {
                V::Int(n) => explain.bind(n),
                V::Text(t) => explain.bind(t),
            };
        }
        let rows = explain.fetch_all(&store.pool).await.unwrap();
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// PostgreSQL (at SWITCHYARD_TEST_POSTGRES, as the integration suite): while the statistics
    /// of `jobs` say that no job is queued and 5,000 are, the admission and wait-reason
    /// statements still find each row by its id, not by scanning every queued job through the
    /// `state` index or the queued jobs' partial indexes (a statement whose cost grows with all
    /// the waiting jobs).
    #[tokio::test]
    async fn multi_row_writes_find_each_row_by_id_whatever_the_statistics_say() {
        let scratch = crate::store::scratch::Scratch::new("sy_plan").await;
        let store = &scratch.store;
        let mut conn = store.pool.acquire().await.unwrap();
        // Rows without their tenant, queue and group: foreign keys are not checked here.
        sqlx::query("SET session_replication_role = replica")
            .execute(&mut *conn)
            .await
            .unwrap();
        let insert = |from: i64, to: i64, state: &'static str| {
            format!(
                "INSERT INTO jobs (id, tenant_id, queue_id, group_id, user_id, username, name, command, gpu_milli, priority_class, priority, preemptible, state, submitted_at, queued_at, updated_at)
                 SELECT '{}' || g, 't', 'q', 'g', 'u', 'u', 'n', 'c', 1000, 'train', 0, 1, '{state}', 0, 0, 0 FROM generate_series({from}, {to}) g",
                if state == "queued" { "q" } else { "r" }
            )
        };
        sqlx::query(&insert(1, 100, "running"))
            .execute(&mut *conn)
            .await
            .unwrap();
        sqlx::query("ANALYZE jobs")
            .execute(&mut *conn)
            .await
            .unwrap();
        sqlx::query(&insert(1, 5000, "queued"))
            .execute(&mut *conn)
            .await
            .unwrap();
        drop(conn);
        let admit = plan(
            store,
            &admit_sql(Dialect::Postgres, 3),
            &[V::Int(1), V::Int(1)],
            &[
                V::Text("pool"),
                V::Int(0),
                V::Text("node"),
                V::Text("[]"),
                V::Int(0),
                V::Text("queued"),
            ],
        )
        .await;
        let wait = plan(
            store,
            &wait_sql(Dialect::Postgres, 3),
            &[],
            &[V::Text("no_capacity"), V::Text("words"), V::Text("queued")],
        )
        .await;
        for (what, p) in [("admission", &admit), ("wait reasons", &wait)] {
            // Every access to `jobs` is by its primary key: no other index, no scan.
            let by_id = p.contains("jobs_pkey")
                && !p.contains("Seq Scan on jobs")
                && p.split(" using ")
                    .skip(1)
                    .all(|rest| rest.starts_with("jobs_pkey "));
            assert!(
                by_id,
                "the {what} statement does not find its rows by id:\n{p}"
            );
        }
        scratch.finish().await;
    }
}
