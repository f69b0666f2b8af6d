//! Committing a cycle's decisions (admissions, preemptions, wait reasons) and launching
//! admitted jobs: each in one transaction with its job events and audit entries.

use super::rows::{admit_rows, insert_events, wait_sql, AdmitRow, EventRow};
use super::*;
use crate::scheduler::core::{Admit, Preempt, Short};

/// A waiting job's reason as a code and in plain words.
/// The words change only when the cause does (not with every admission elsewhere), so a
/// waiting job's row is rewritten only then. `victims` names the jobs stopping for it.
pub(super) fn wait_words(
    r: &WaitReason,
    group: &str,
    job_gpus: i64,
    victims: &[&str],
) -> (&'static str, String) {
    match r {
        WaitReason::OverLimit { limit, .. } => (
            "over_limit",
            format!(
                "With this job's {} GPUs, {group} would go over its limit of {} GPUs. It starts when the group's other jobs finish.",
                gpus(job_gpus), gpus(*limit as i64)
            ),
        ),
        WaitReason::QuotaExhausted { reservation, .. } => (
            "quota_exhausted",
            format!(
                "With this job's {} GPUs, {group} would go beyond its {} reserved GPUs, and this job may not borrow idle GPUs (over-quota is off for its queue, group or user, or its priority class is not preemptible). It starts when the group's other jobs finish.",
                gpus(job_gpus), gpus(*reservation as i64)
            ),
        ),
        WaitReason::NoCapacity { short } => no_room(*short, group, job_gpus),
        WaitReason::WaitingForPreemption { .. } => (
            "reclaiming",
            format!(
                "Reclaiming {group}'s reserved GPUs from other groups that borrowed them: {} {} being stopped for it (checkpoint, then stop). It starts as soon as they have.",
                named(victims),
                if victims.len() == 1 { "is" } else { "are" }
            ),
        ),
        WaitReason::CapacityHeld { free, needed } => (
            "capacity_held",
            format!(
                "Within {group}'s reservation, and it has waited long enough that a node is now held for it: no other job starts there, and it starts when the node's running jobs have freed {} GPUs ({} free so far).",
                gpus(*needed as i64), gpus(*free as i64)
            ),
        ),
        WaitReason::BehindHeldJob { .. } => (
            "behind_held_job",
            format!(
                "An earlier job of {group} has waited long enough that capacity is now held for it; the group's jobs behind it wait until it has started, so that a stream of smaller jobs cannot starve it."
            ),
        ),
        WaitReason::NoIdleCapacity => (
            "no_idle_capacity",
            format!(
                "{group} is at or beyond its reservation, so this job borrows idle GPUs, and none are idle for it now (idle GPUs go first to the borrowing groups with the smallest share for their weight)."
            ),
        ),
        WaitReason::Unschedulable => (
            "unschedulable",
            "This request cannot be placed on any node of the queue's pools.".to_string(),
        ),
    }
}

/// Why a job within its group's reservation does not fit, by what it lacks.
fn no_room(short: Short, group: &str, job_gpus: i64) -> (&'static str, String) {
    let n = gpus(job_gpus);
    let (code, why) = match short {
        Short::Gpus => (
            "no_capacity",
            format!("no node of the queue's pools has {n} GPUs free, and no GPUs borrowed by other groups are left to reclaim"),
        ),
        Short::Fragmented => (
            "fragmented",
            format!("enough GPUs are free across the queue's pools, but not {n} together on one node (or device); jobs on one node are not spread across nodes"),
        ),
        Short::GpuMemory => (
            "gpu_memory",
            format!("a device has {n} GPUs free, but not the GPU memory this job asks for"),
        ),
        Short::Cpu => (
            "cpu",
            format!("a node has {n} GPUs free, but not the CPU cores the queue's profile gives each job"),
        ),
        Short::HostMemory => (
            "host_memory",
            format!("a node has {n} GPUs free, but not the memory the queue's profile gives each job"),
        ),
        Short::Held => (
            "held_elsewhere",
            format!("the nodes with {n} GPUs free are held for other jobs (one that waited long, or one whose reclaimed GPUs are being freed)"),
        ),
        Short::Protected { until } => (
            "protected",
            format!("the GPUs other groups borrowed run jobs still protected by their minimum runtime; they may be reclaimed from {}", app::time::format_ms(until)),
        ),
    };
    (
        code,
        format!("Within {group}'s reservation, but {why}. It starts when capacity frees up."),
    )
}

type WordsKey = (u8, u32, u32, Option<Short>);

/// What a wait reason's words depend on besides the group and the job's size; `None` when
/// they name other jobs (or for a reason this does not know).
fn words_key(r: &WaitReason) -> Option<WordsKey> {
    Some(match r {
        WaitReason::OverLimit { limit, .. } => (0, *limit, 0, None),
        WaitReason::QuotaExhausted { reservation, .. } => (1, *reservation, 0, None),
        WaitReason::NoCapacity { short } => (2, 0, 0, Some(*short)),
        WaitReason::CapacityHeld { free, needed } => (3, *free, *needed, None),
        WaitReason::BehindHeldJob { .. } => (4, 0, 0, None),
        WaitReason::NoIdleCapacity => (5, 0, 0, None),
        WaitReason::Unschedulable => (6, 0, 0, None),
        // Names the jobs stopping for it: built per job. No wildcard: a new reason must say
        // what its words depend on.
        WaitReason::WaitingForPreemption { .. } => return None,
    })
}

/// `a`, `a and b`, `a, b, c and 4 more`.
fn named(names: &[&str]) -> String {
    match names {
        [] => "over-quota jobs".to_string(),
        [one] => format!("over-quota job {one}"),
        [a, b] => format!("over-quota jobs {a} and {b}"),
        [a, b, c] => format!("over-quota jobs {a}, {b} and {c}"),
        [a, b, c, rest @ ..] => format!("over-quota jobs {a}, {b}, {c} and {} more", rest.len()),
    }
}

/// The event of a job handed to its pool's executor.
const HANDED: &str = "handed to the pool's executor";

/// Admissions in one cycle from which PostgreSQL commits them in two transactions at once
/// (see [`Driver::commit`]).
const SPLIT_ADMITS: usize = 512;

/// What a cycle committed: the ids admitted (and already `starting`), the ids whose preemption was stored, and the
/// wait reasons written (core job id, code, words).
pub(super) type Committed = (
    Vec<String>,
    HashSet<String>,
    Vec<(u64, &'static str, String)>,
);

impl Driver {
    /// What to hand each job's executor. A job whose stored row cannot be read back whole (a
    /// corrupt `env`, `slices` or abort callback) is not launched without it: it comes back as
    /// a `Lost` event with the reason, so it ends visibly and frees its capacity.
    pub(super) async fn launches(
        &self,
        ids: &[String],
    ) -> Result<(Vec<(ExecutorKind, Launch)>, Vec<ExecEvent>), sqlx::Error> {
        let mut out = Vec::with_capacity(ids.len());
        let mut corrupt = Vec::new();
        for chunk in ids.chunks(self.store.dialect.statement_params()) {
            let sql = format!(
                "SELECT j.id, j.command, j.image, j.env, j.checkpoint_dir, j.abort_kind, j.abort_command, j.abort_timeout_ms, j.duration_ms, j.resume_count,
                    j.node_name, j.slices, j.handle, j.started_at, j.admitted_at, p.executor
                 FROM jobs j JOIN pools p ON p.id = j.pool_id WHERE j.id IN ({})",
                self.store.dialect.params(1, chunk.len())
            );
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(id.clone());
            }
            for r in q.fetch_all(&self.store.pool).await? {
                let job_id: String = r.try_get("id")?;
                match launch_from_row(&r) {
                    Ok(l) => out.push(l),
                    Err(e) => {
                        tracing::error!(job = %job_id, error = %e, "scheduler: a job's stored row is corrupt; not launching it");
                        corrupt.push(ExecEvent::Lost {
                            job_id,
                            reason: format!("its stored definition is corrupt ({e})"),
                        });
                    }
                }
            }
        }
        Ok((out, corrupt))
    }

    /// Commits admissions, preemptions and wait reasons in one transaction with their events
    /// and audit entries. Returns the ids admitted, the ids whose preemption was stored and
    /// the wait reasons written (by the core's job id), which do not stamp `updated_at`.
    ///
    /// On PostgreSQL a cycle with at least [`SPLIT_ADMITS`] admissions commits them in two
    /// transactions at once, each admission whole in one of them (the preemptions and wait
    /// reasons with the first half), each half's audit entries on a lane of its own
    /// ([`Chain::Scheduler`], [`Chain::Scheduler1`]) so that neither waits for the other's
    /// chain head: a store with two cores writes them in about half the time. Where one half
    /// fails, the other stands and the failed half's jobs are decided again by the next
    /// cycle (as if this one had not admitted them).
    pub(super) async fn commit(
        &self,
        l: &Loaded,
        d: &Decisions,
        now: i64,
    ) -> Result<Committed, sqlx::Error> {
        if self.store.dialect != Dialect::Postgres || d.admits.len() < SPLIT_ADMITS {
            return self
                .commit_part(l, &d.admits, &d.preempts, &d.waiting, now, Chain::Scheduler)
                .await;
        }
        let (first, second) = d.admits.split_at(d.admits.len() / 2);
        let (a, b) = tokio::join!(
            self.commit_part(l, first, &d.preempts, &d.waiting, now, Chain::Scheduler),
            self.commit_part(l, second, &[], &[], now, Chain::Scheduler1)
        );
        match (a, b) {
            (Ok(mut a), Ok(b)) => {
                a.0.extend(b.0);
                a.1.extend(b.1);
                a.2.extend(b.2);
                Ok(a)
            }
            (Ok(stood), Err(e)) | (Err(e), Ok(stood)) => {
                tracing::error!(error = %e, "scheduler: half of a cycle's admissions failed to commit; the next cycle decides them again");
                Ok(stood)
            }
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// [`Driver::commit`]'s transaction for some of a cycle's decisions.
    async fn commit_part(
        &self,
        l: &Loaded,
        admits: &[Admit],
        preempts: &[Preempt],
        waiting: &[(u64, WaitReason)],
        now: i64,
        lane: Chain,
    ) -> Result<Committed, sqlx::Error> {
        let mut wait_updates = Vec::new();
        // Most waiting jobs share their words (same cause, group and size): written once.
        let mut shared: HashMap<(Option<u32>, i64, WordsKey), (&'static str, String)> =
            HashMap::new();
        for (job, reason) in waiting {
            let j = &l.jobs[*job as usize];
            let group_index = j.queue.map(|q| l.queue_group[q as usize]);
            let group = group_index
                .map(|g| l.groups[g as usize].name.as_str())
                .unwrap_or("the group");
            let own;
            let (code, text): (&'static str, &str) = match words_key(reason) {
                Some(key) => {
                    let w = shared
                        .entry((group_index, j.gpu_milli, key))
                        .or_insert_with(|| wait_words(reason, group, j.gpu_milli, &[]));
                    (w.0, w.1.as_str())
                }
                None => {
                    let victims: Vec<&str> = match reason {
                        WaitReason::WaitingForPreemption { victims } => victims
                            .iter()
                            .map(|v| l.jobs[*v as usize].name.as_str())
                            .collect(),
                        _ => Vec::new(),
                    };
                    own = wait_words(reason, group, j.gpu_milli, &victims);
                    (own.0, own.1.as_str())
                }
            };
            if j.wait_code.as_deref() != Some(code) || j.wait_reason.as_deref() != Some(text) {
                wait_updates.push((*job, code, text.to_string()));
            }
        }
        if admits.is_empty() && preempts.is_empty() && wait_updates.is_empty() {
            return Ok((Vec::new(), HashSet::new(), Vec::new()));
        }
        let mut tx = self.store.begin_write().await?;
        let mut events = Vec::new();
        let mut audits = Vec::new();
        let mut admitted = Vec::new();
        let mut preempted = HashSet::new();
        let rows: Vec<AdmitRow> = admits
            .iter()
            .map(|a| {
                let pool = a.placement.pool as usize;
                AdmitRow {
                    id: l.jobs[a.job as usize].id.clone(),
                    pool_id: l.pool_ids[pool].clone(),
                    node: a.placement.node as i64,
                    node_name: l.node_names[pool]
                        .get(a.placement.node as usize)
                        .cloned()
                        .unwrap_or_default(),
                    slices: serde_json::to_string(&a.placement.slices)
                        .unwrap_or_else(|_| "[]".into()),
                    over_quota: i64::from(a.over_quota),
                }
            })
            .collect();
        let changed = admit_rows(&mut tx, now, &rows).await?;
        for (a, row) in admits.iter().zip(&rows) {
            let j = &l.jobs[a.job as usize];
            let pool = a.placement.pool as usize;
            if !changed.contains(&row.id) {
                continue;
            }
            let node_name = row.node_name.clone();
            let detail = format!(
                "admitted to {} on {}{}",
                l.pool_names[pool],
                node_name,
                if a.over_quota {
                    " (over quota: borrowing idle GPUs, may be preempted)"
                } else {
                    ""
                }
            );
            // Admitted and handed to the executor in one write: the job's history keeps both
            // steps, and a restart adopts (or starts) a `starting` job like any other.
            events.push(EventRow {
                tenant_id: j.tenant_id.clone(),
                job_id: j.id.clone(),
                from: Some(JobState::Queued),
                to: JobState::Admitted,
                detail,
            });
            events.push(EventRow {
                tenant_id: j.tenant_id.clone(),
                job_id: j.id.clone(),
                from: Some(JobState::Admitted),
                to: JobState::Starting,
                detail: HANDED.into(),
            });
            audits.push(BatchRecord {
                tenant_id: j.tenant_id.clone(),
                action: "job.admit",
                target_kind: "job",
                target_id: j.id.clone(),
                summary: json!({"name": j.name, "pool": l.pool_names[pool], "node": node_name, "gpu_milli": j.gpu_milli, "over_quota": a.over_quota}),
            });
            admitted.push(j.id.clone());
        }
        for p in preempts {
            let v = &l.jobs[p.victim as usize];
            let f = &l.jobs[p.for_job as usize];
            let for_group = &l.groups[p.for_group as usize];
            let victim_group = &l.groups[p.victim_group as usize];
            let changed = sqlx::query(&format!(
                "UPDATE jobs SET state = 'preempting', stop_reason = 'preempt', preempted_for = $1, updated_at = $2, {}
                 WHERE id = $3 AND state IN ('admitted', 'starting', 'running') AND stop_reason IS NULL",
                set_change(tx.dialect)
            ))
            .bind(&for_group.id)
            .bind(now)
            .bind(&v.id)
            .execute(&mut *tx.tx)
            .await?
            .rows_affected();
            if changed == 0 {
                continue;
            }
            preempted.insert(v.id.clone());
            let same_tenant = for_group.tenant_id == v.tenant_id;
            let for_name = if same_tenant {
                for_group.name.clone()
            } else {
                "a group of another organization".to_string()
            };
            let reason = format!(
                "{} was borrowing idle GPUs beyond its reservation; {} needs its reserved GPUs back",
                victim_group.name, for_name
            );
            sqlx::query(
                "INSERT INTO preemptions (id, at, pool_id, victim_tenant_id, victim_job_id, victim_group_id, for_tenant_id, for_job_id, for_group_id, gpu_milli, reason)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(new_id())
            .bind(now)
            .bind(v.pool_id.clone().unwrap_or_default())
            .bind(&v.tenant_id)
            .bind(&v.id)
            .bind(&victim_group.id)
            .bind(&f.tenant_id)
            .bind(&f.id)
            .bind(&for_group.id)
            .bind(v.gpu_milli)
            .bind(&reason)
            .execute(&mut *tx.tx)
            .await?;
            events.push(EventRow {
                tenant_id: v.tenant_id.clone(),
                job_id: v.id.clone(),
                from: Some(v.state),
                to: JobState::Preempting,
                detail: format!("preempting: {reason}; running its abort callback, then stopping"),
            });
            audits.push(BatchRecord {
                tenant_id: v.tenant_id.clone(),
                action: "job.preempt",
                target_kind: "job",
                target_id: v.id.clone(),
                summary: json!({"name": v.name, "group": victim_group.name, "for_group": for_name, "gpu_milli": v.gpu_milli}),
            });
        }
        // Many rows per statement: a cycle may give thousands of jobs their first reason.
        for chunk in wait_updates.chunks(tx.dialect.statement_params() / 4) {
            let sql = wait_sql(tx.dialect, chunk.len());
            let mut q = sqlx::query(&sql);
            for (job, code, text) in chunk {
                q = q
                    .bind(&l.jobs[*job as usize].id)
                    .bind(*code)
                    .bind(text)
                    .bind(JobState::Queued.as_str());
            }
            q.execute(&mut *tx.tx).await?;
        }
        insert_events(&mut tx, now, &events).await?;
        self.audit(&mut tx, now, lane, &audits).await?;
        tx.commit().await?;
        if !admitted.is_empty() || !preempted.is_empty() {
            self.store.note_scheduling_change();
        }
        Ok((admitted, preempted, wait_updates))
    }

    /// Marks jobs left `admitted` (by a build that stored the two steps apart) `starting` in
    /// one transaction and hands them to their executors.
    pub(super) async fn launch(&mut self, ids: &[String]) -> Result<(), sqlx::Error> {
        let now = self.store.now();
        let mut started = Vec::new();
        let mut tx = self.store.begin_write().await?;
        for chunk in ids.chunks(tx.dialect.statement_params()) {
            let sql = format!(
                "UPDATE jobs SET state = 'starting', updated_at = {}, {} WHERE state = 'admitted' AND stop_reason IS NULL AND id IN ({}) RETURNING id, tenant_id, name",
                tx.dialect.param(1),
                set_change(tx.dialect),
                tx.dialect.params(2, chunk.len())
            );
            let mut q = sqlx::query(&sql).bind(now);
            for id in chunk {
                q = q.bind(id.clone());
            }
            for r in q.fetch_all(&mut *tx.tx).await? {
                started.push((
                    r.try_get::<String, _>("id")?,
                    r.try_get::<String, _>("tenant_id")?,
                    r.try_get::<String, _>("name")?,
                ));
            }
        }
        if started.is_empty() {
            return Ok(());
        }
        let events: Vec<EventRow> = started
            .iter()
            .map(|(id, t, _)| EventRow {
                tenant_id: t.clone(),
                job_id: id.clone(),
                from: Some(JobState::Admitted),
                to: JobState::Starting,
                detail: HANDED.into(),
            })
            .collect();
        let audits: Vec<BatchRecord> = started
            .iter()
            .map(|(id, t, name)| BatchRecord {
                tenant_id: t.clone(),
                action: "job.start",
                target_kind: "job",
                target_id: id.clone(),
                summary: json!({"name": name}),
            })
            .collect();
        insert_events(&mut tx, now, &events).await?;
        self.audit(&mut tx, now, Chain::Scheduler, &audits).await?;
        tx.commit().await?;
        self.store.note_scheduling_change();
        let ids: Vec<String> = started.into_iter().map(|(id, _, _)| id).collect();
        self.hand_over(&ids).await
    }

    /// Hands `starting` jobs to their executors (a corrupt stored row ends its job as lost).
    pub(super) async fn hand_over(&mut self, ids: &[String]) -> Result<(), sqlx::Error> {
        let (launches, corrupt) = self.launches(ids).await?;
        for (kind, launch) in launches {
            self.executor(kind).launch(launch).await;
        }
        if !corrupt.is_empty() {
            self.apply_events(&corrupt).await?;
        }
        Ok(())
    }
}

/// One job's launch as stored: every column read whole or an error naming the corrupt one.
fn launch_from_row(r: &AnyRow) -> Result<(ExecutorKind, Launch), sqlx::Error> {
    let env: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&r.try_get::<String, _>("env")?).map_err(|e| corrupt("env", e))?;
    let devices = match r.try_get::<Option<String>, _>("slices")? {
        Some(s) => serde_json::from_str(&s).map_err(|e| corrupt("slices", e))?,
        None => Vec::new(),
    };
    let abort = match (
        opt_text_enum::<AbortKind>(r, "abort_kind")?,
        r.try_get::<Option<String>, _>("abort_command")?,
    ) {
        (Some(kind), Some(command)) => Some(AbortCallback {
            kind,
            command,
            timeout_ms: r.try_get("abort_timeout_ms")?,
        }),
        _ => None,
    };
    Ok((
        text_enum(r, "executor")?,
        Launch {
            job_id: r.try_get("id")?,
            resume_count: r.try_get("resume_count")?,
            command: r.try_get("command")?,
            image: r.try_get("image")?,
            env: env.into_iter().collect(),
            checkpoint_dir: r.try_get("checkpoint_dir")?,
            abort,
            node: r
                .try_get::<Option<String>, _>("node_name")?
                .unwrap_or_default(),
            devices,
            duration_ms: r.try_get("duration_ms")?,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reclaiming_job_names_the_jobs_stopping_for_it() {
        let r = WaitReason::WaitingForPreemption {
            victims: vec![1, 2],
        };
        let (code, text) = wait_words(&r, "nlp", 2000, &["train-3", "train-2"]);
        assert_eq!(code, "reclaiming");
        assert!(
            text.contains("over-quota jobs train-3 and train-2 are being stopped"),
            "{text}"
        );
        let many = named(&["a", "b", "c", "d", "e"]);
        assert_eq!(many, "over-quota jobs a, b, c and 2 more");
        // The words do not carry the group's changing use, so they change only with the cause.
        let over = WaitReason::OverLimit {
            used: 500,
            limit: 1000,
        };
        let later = WaitReason::OverLimit {
            used: 750,
            limit: 1000,
        };
        assert_eq!(
            wait_words(&over, "g", 1000, &[]),
            wait_words(&later, "g", 1000, &[])
        );
    }
}
