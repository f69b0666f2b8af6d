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
    for chunk in rows.chunks(d.statement_params() / 6) {
        let sql = format!(
            "UPDATE jobs SET state = 'starting', pool_id = v.column2, node = v.column3, node_name = v.column4, slices = v.column5, over_quota = v.column6,
                admitted_at = {}, wait_code = NULL, wait_reason = NULL, updated_at = {}, {}
             FROM (VALUES {}) AS v
             WHERE jobs.id = v.column1 AND jobs.state = 'queued' AND jobs.stop_reason IS NULL RETURNING id",
            d.param(1),
            d.param(2),
            set_change(d),
            d.rows(3, chunk.len(), 6, None)
        );
        let mut q = sqlx::query(&sql).bind(now).bind(now);
        for r in chunk {
            q = q
                .bind(&r.id)
                .bind(&r.pool_id)
                .bind(r.node)
                .bind(&r.node_name)
                .bind(&r.slices)
                .bind(r.over_quota);
        }
        for row in q.fetch_all(&mut *tx.tx).await? {
            changed.insert(row.try_get::<String, _>("id")?);
        }
    }
    Ok(changed)
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
