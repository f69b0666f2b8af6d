//! Committing what the executors report (running, exited, stopped, lost), in one
//! transaction per batch of events.

use super::rows::{flush_running, insert_events, EventRow};
use super::*;
use crate::store::{opt_text_enum, text_enum};

/// How many times a batch of events is applied again after a job changed under it.
const CONFLICT_TRIES: u32 = 5;

impl Driver {
    /// Commits what the executors reported, in one transaction. Each transition is written on
    /// the condition that the job is still in the state read before it; when one changed
    /// meanwhile (another writer got there first, such as the late commit of a server that died
    /// as this one started), the batch is rolled back and applied again from a fresh read, so
    /// no transition, job event or audit entry is written twice and no event is dropped.
    ///
    /// On PostgreSQL at least [`SPLIT_EVENTS`] events are committed in two transactions at
    /// once, each job's events in one of them and in their order, each half's audit entries
    /// on a lane of its own (a store with two cores writes them in about half the time).
    /// Where one fails, the whole batch is applied again: the half that committed finds its
    /// jobs moved on and writes nothing twice.
    pub(super) async fn apply_events(&mut self, evs: &[ExecEvent]) -> Result<(), sqlx::Error> {
        let parts = if self.store.dialect == Dialect::Postgres && evs.len() >= SPLIT_EVENTS {
            let (a, b) = halves_by_job(evs);
            let (a, b) = tokio::join!(
                self.apply_part(&a, Chain::Scheduler),
                self.apply_part(&b, Chain::Scheduler1)
            );
            vec![a, b]
        } else {
            vec![self.apply_part(evs, Chain::Scheduler).await]
        };
        // The stops a committed half ended are over even where the other half failed: its
        // retry finds those jobs ended and would not report them again.
        let mut failed = None;
        for part in parts {
            match part {
                Ok(done) => {
                    for id in &done {
                        self.stops_sent.remove(id);
                    }
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Commits `evs` (see [`Driver::apply_events`]); the jobs whose stop is over.
    async fn apply_part(&self, evs: &[ExecEvent], lane: Chain) -> Result<Vec<String>, sqlx::Error> {
        for _ in 1..CONFLICT_TRIES {
            match self.try_apply_events(evs, lane).await? {
                Ok(done) => return Ok(done),
                Err(job) => {
                    tracing::info!(%job, "scheduler: a job changed while its executor events were committed; applying them again")
                }
            }
        }
        match self.try_apply_events(evs, lane).await? {
            Ok(done) => Ok(done),
            Err(job) => Err(sqlx::Error::Protocol(format!(
                "job {job} kept changing while its executor events were committed"
            ))),
        }
    }

    /// One try of [`Driver::apply_part`]: the jobs whose stop is over, or `Err(job)` when that
    /// job was no longer in the state read (nothing was committed).
    async fn try_apply_events(
        &self,
        evs: &[ExecEvent],
        lane: Chain,
    ) -> Result<Result<Vec<String>, String>, sqlx::Error> {
        let now = self.store.now();
        let mut ids: Vec<String> = evs.iter().map(|e| event_job(e).to_string()).collect();
        ids.sort_unstable();
        ids.dedup();
        // Current state of each job, updated as the events apply in order.
        let mut jobs: HashMap<String, EventJob> = HashMap::new();
        for chunk in ids.chunks(self.store.dialect.statement_params()) {
            let sql = format!(
                "SELECT id, tenant_id, name, state, stop_reason, resume_count, started_at FROM jobs WHERE id IN ({})",
                self.store.dialect.params(1, chunk.len())
            );
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(id.clone());
            }
            for r in q.fetch_all(&self.store.pool).await? {
                jobs.insert(
                    r.try_get("id")?,
                    (
                        r.try_get("tenant_id")?,
                        r.try_get("name")?,
                        text_enum::<JobState>(&r, "state")?,
                        opt_text_enum::<StopReason>(&r, "stop_reason")?,
                        r.try_get("resume_count")?,
                        r.try_get("started_at")?,
                    ),
                );
            }
        }
        let mut tx = self.store.begin_write().await?;
        let mut events = Vec::new();
        let mut audits = Vec::new();
        let mut changed_any = false;
        // Jobs whose stop is over once this commits (their stops may be sent again later).
        let mut stops_done: Vec<String> = Vec::new();
        // `running` transitions are written together; any other write first flushes them,
        // so the statements still apply in event order.
        let mut running: Vec<(String, String, JobState)> = Vec::new();
        for ev in evs {
            let id = event_job(ev);
            let Some((tenant, name, state, stop_reason, resume_count, started_at)) =
                jobs.get_mut(id)
            else {
                continue;
            };
            if !matches!(ev, ExecEvent::Running { .. }) && !running.is_empty() {
                if let Some(job) = flush_running(&mut tx, now, &mut running).await? {
                    return Ok(Err(job));
                }
            }
            let live = state.is_live() && *state != JobState::Queued;
            let decided = by_intent(ev, *stop_reason);
            let ev = decided.as_ref().unwrap_or(ev);
            // (new state, detail, audit action, exit code) for a transition.
            let mut transition: Option<(JobState, String, &'static str, Option<i64>)> = None;
            match ev {
                ExecEvent::Running { handle, .. } => {
                    if matches!(*state, JobState::Admitted | JobState::Starting) {
                        running.push((id.to_string(), handle.clone(), *state));
                        events.push(EventRow {
                            tenant_id: tenant.clone(),
                            job_id: id.to_string(),
                            from: Some(*state),
                            to: JobState::Running,
                            detail: format!("running ({handle})"),
                        });
                        audits.push(BatchRecord {
                            tenant_id: tenant.clone(),
                            action: "job.running",
                            target_kind: "job",
                            target_id: id.to_string(),
                            summary: json!({"name": name, "handle": handle}),
                        });
                        *state = JobState::Running;
                        *started_at = Some(now);
                        changed_any = true;
                    } else if live {
                        // Already being stopped: keep the handle so a restart can find it.
                        if let Some(job) = flush_running(&mut tx, now, &mut running).await? {
                            return Ok(Err(job));
                        }
                        sqlx::query(&format!("UPDATE jobs SET handle = $1, started_at = COALESCE(started_at, $2), updated_at = $2, {} WHERE id = $3", set_change(tx.dialect)))
                            .bind(handle)
                            .bind(now)
                            .bind(id)
                            .execute(&mut *tx.tx)
                            .await?;
                    }
                }
                ExecEvent::Exited { code, .. } if live => {
                    let (to, action) = if *code == 0 {
                        (JobState::Succeeded, "job.succeeded")
                    } else {
                        (JobState::Failed, "job.failed")
                    };
                    transition = Some((
                        to,
                        format!("exited with code {code}"),
                        action,
                        Some(*code as i64),
                    ));
                }
                ExecEvent::Stopped {
                    checkpointed,
                    detail,
                    ..
                } if live => match stop_reason {
                    Some(StopReason::Preempt) => {
                        let n = *resume_count + 1;
                        let changed = sqlx::query(&format!(
                            "UPDATE jobs SET state = 'queued', resume_count = $1, pool_id = NULL, node = NULL, node_name = NULL, slices = NULL, over_quota = 0,
                                stop_reason = NULL, preempted_for = NULL, handle = NULL, admitted_at = NULL, started_at = NULL, queued_at = $2, updated_at = $2,
                                wait_code = NULL, wait_reason = NULL, {} WHERE id = $3 AND state = $4",
                            set_change(tx.dialect)
                        ))
                        .bind(n)
                        .bind(now)
                        .bind(id)
                        .bind(state.as_str())
                        .execute(&mut *tx.tx)
                        .await?
                        .rows_affected();
                        if changed == 0 {
                            return Ok(Err(id.to_string()));
                        }
                        events.push(EventRow {
                            tenant_id: tenant.clone(),
                            job_id: id.to_string(),
                            from: Some(*state),
                            to: JobState::Preempted,
                            detail: detail.clone(),
                        });
                        events.push(EventRow {
                            tenant_id: tenant.clone(),
                            job_id: id.to_string(),
                            from: Some(JobState::Preempted),
                            to: JobState::Queued,
                            detail: format!(
                                "requeued to resume{} (attempt {})",
                                if *checkpointed {
                                    " from its checkpoint"
                                } else {
                                    ""
                                },
                                n + 1
                            ),
                        });
                        audits.push(BatchRecord {
                            tenant_id: tenant.clone(),
                            action: "job.requeue",
                            target_kind: "job",
                            target_id: id.to_string(),
                            summary: json!({"name": name, "checkpointed": checkpointed, "resume_count": n}),
                        });
                        *state = JobState::Queued;
                        *stop_reason = None;
                        *resume_count = n;
                        stops_done.push(id.to_string());
                        changed_any = true;
                    }
                    Some(StopReason::Abort) => {
                        transition = Some((JobState::Aborted, detail.clone(), "job.aborted", None));
                    }
                    Some(StopReason::MaxRuntime) => {
                        transition = Some((
                            JobState::Failed,
                            format!("exceeded its maximum runtime: {detail}"),
                            "job.failed",
                            None,
                        ));
                    }
                    None => {
                        transition = Some((
                            JobState::Lost,
                            format!("stopped without a request: {detail}"),
                            "job.lost",
                            None,
                        ));
                    }
                },
                ExecEvent::Lost { reason, .. } if live => {
                    transition = Some((JobState::Lost, reason.clone(), "job.lost", None));
                }
                _ => {}
            }
            if let Some((to, detail, action, code)) = transition {
                let duration = started_at.map(|s| now - s);
                let changed = sqlx::query(&format!("UPDATE jobs SET state = $1, exit_code = $2, detail = $3, finished_at = $4, updated_at = $4, handle = NULL, {} WHERE id = $5 AND state = $6", set_change(tx.dialect)))
                    .bind(to.as_str())
                    .bind(code)
                    .bind(&detail)
                    .bind(now)
                    .bind(id)
                    .bind(state.as_str())
                    .execute(&mut *tx.tx)
                    .await?
                    .rows_affected();
                if changed == 0 {
                    return Ok(Err(id.to_string()));
                }
                events.push(EventRow {
                    tenant_id: tenant.clone(),
                    job_id: id.to_string(),
                    from: Some(*state),
                    to,
                    detail: detail.clone(),
                });
                audits.push(BatchRecord {
                    tenant_id: tenant.clone(),
                    action,
                    target_kind: "job",
                    target_id: id.to_string(),
                    summary: json!({"name": name, "detail": detail, "ran_ms": duration}),
                });
                *state = to;
                stops_done.push(id.to_string());
                changed_any = true;
            }
        }
        if let Some(job) = flush_running(&mut tx, now, &mut running).await? {
            return Ok(Err(job));
        }
        insert_events(&mut tx, now, &events).await?;
        self.audit(&mut tx, now, lane, &audits).await?;
        tx.commit().await?;
        if changed_any {
            self.store.note_scheduling_change();
            self.handle.poke();
        }
        Ok(Ok(stops_done))
    }
}

/// Events in a batch from which PostgreSQL commits them in two transactions at once (see
/// [`Driver::apply_events`]).
const SPLIT_EVENTS: usize = 512;

/// `evs` in two halves of about as many jobs, each job's events in one half, in order.
pub(super) fn halves_by_job(evs: &[ExecEvent]) -> (Vec<ExecEvent>, Vec<ExecEvent>) {
    let mut side: HashMap<&str, bool> = HashMap::new();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for ev in evs {
        let next = side.len() % 2 == 1;
        let second = *side.entry(event_job(ev)).or_insert(next);
        if second {
            b.push(ev.clone());
        } else {
            a.push(ev.clone());
        }
    }
    (a, b)
}

/// (tenant, name, state, stop reason, resume count, started at) of a job an event is about.
type EventJob = (
    String,
    String,
    JobState,
    Option<StopReason>,
    i64,
    Option<i64>,
);

fn event_job(e: &ExecEvent) -> &str {
    match e {
        ExecEvent::Running { job_id, .. }
        | ExecEvent::Exited { job_id, .. }
        | ExecEvent::Stopped { job_id, .. }
        | ExecEvent::Lost { job_id, .. } => job_id,
    }
}

/// A job whose stop was stored (preempt, abort, runtime limit) ends as that stop decides, not
/// as its process happened to exit: after a restart the executor no longer knows it sent the
/// signal, and reports the wrapper's exit (143 after SIGTERM) as a plain exit, or the job as
/// lost when SIGKILL took the wrapper before it could record a code. Such an end is read as
/// the stop it answers (a preempted job is requeued). `None`: the event stands as reported.
pub(super) fn by_intent(ev: &ExecEvent, stop: Option<StopReason>) -> Option<ExecEvent> {
    match (ev, stop) {
        (ExecEvent::Exited { job_id, code }, Some(_)) => Some(ExecEvent::Stopped {
            job_id: job_id.clone(),
            checkpointed: false,
            detail: format!("exited with code {code} after its stop was sent"),
        }),
        (ExecEvent::Lost { job_id, reason }, Some(_)) => Some(ExecEvent::Stopped {
            job_id: job_id.clone(),
            checkpointed: false,
            detail: format!("ended after its stop was sent ({reason})"),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_keep_each_jobs_events_together_and_in_order() {
        let running = |j: &str| ExecEvent::Running {
            job_id: j.into(),
            handle: format!("h-{j}"),
        };
        let exited = |j: &str| ExecEvent::Exited {
            job_id: j.into(),
            code: 0,
        };
        let evs = vec![
            running("a"),
            running("b"),
            running("c"),
            exited("a"),
            running("d"),
            exited("b"),
            exited("c"),
        ];
        let (x, y) = halves_by_job(&evs);
        assert_eq!(x.len() + y.len(), evs.len(), "no event lost or doubled");
        for half in [&x, &y] {
            for j in ["a", "b", "c", "d"] {
                let mine: Vec<&ExecEvent> = half.iter().filter(|e| event_job(e) == j).collect();
                let all: Vec<&ExecEvent> = evs.iter().filter(|e| event_job(e) == j).collect();
                assert!(
                    mine.is_empty() || mine == all,
                    "job {j}: all its events in one half, in order"
                );
            }
        }
        // About as many jobs on each side.
        let jobs = |h: &Vec<ExecEvent>| {
            let mut ids: Vec<&str> = h.iter().map(event_job).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        };
        assert_eq!((jobs(&x), jobs(&y)), (2, 2));
    }

    #[test]
    fn an_exit_during_a_stored_stop_is_that_stop() {
        let exit = ExecEvent::Exited {
            job_id: "j".into(),
            code: 143,
        };
        for reason in StopReason::ALL {
            match by_intent(&exit, Some(*reason)) {
                Some(ExecEvent::Stopped { job_id, detail, .. }) => {
                    assert_eq!(job_id, "j");
                    assert!(detail.contains("143"), "{detail}");
                }
                other => panic!("{reason}: {other:?}"),
            }
        }
        assert_eq!(
            by_intent(&exit, None),
            None,
            "no stop stored: the exit stands"
        );
        // Killed (SIGKILL takes the wrapper too: no exit code) after the stop was stored.
        let lost = ExecEvent::Lost {
            job_id: "j".into(),
            reason: "process ended without an exit code".into(),
        };
        match by_intent(&lost, Some(StopReason::Preempt)) {
            Some(ExecEvent::Stopped { detail, .. }) => {
                assert!(detail.contains("without an exit code"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(by_intent(&lost, None), None, "no stop stored: lost stands");
    }
}
