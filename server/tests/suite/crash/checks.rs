//! What the store holds after the kills, read back and judged: fields consistent with each
//! job's state, event chains, and job processes that outlive their job.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use sqlx::Row as _;

use app::model::JobState;

use crate::common::TestApp;

use super::server::job_processes;

/// One stored job, as the checks read it.
#[derive(Debug)]
pub(super) struct Stored {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) state: String,
    pub(super) stop_reason: Option<String>,
    pub(super) pool_id: Option<String>,
    pub(super) node: Option<i64>,
    pub(super) handle: Option<String>,
    pub(super) exit_code: Option<i64>,
    pub(super) detail: Option<String>,
    pub(super) max_runtime_ms: Option<i64>,
    pub(super) resume_count: i64,
    pub(super) started_at: Option<i64>,
    pub(super) finished_at: Option<i64>,
}

pub(super) async fn rows(app: &TestApp) -> Vec<Stored> {
    sqlx::query("SELECT id, name, state, stop_reason, pool_id, node, handle, exit_code, detail, max_runtime_ms, resume_count, started_at, finished_at FROM jobs")
        .fetch_all(&app.store().pool)
        .await
        .unwrap()
        .iter()
        .map(|r| Stored {
            id: r.get("id"),
            name: r.get("name"),
            state: r.get("state"),
            stop_reason: r.get("stop_reason"),
            pool_id: r.get("pool_id"),
            node: r.get("node"),
            handle: r.get("handle"),
            exit_code: r.get("exit_code"),
            detail: r.get("detail"),
            max_runtime_ms: r.get("max_runtime_ms"),
            resume_count: r.get("resume_count"),
            started_at: r.get("started_at"),
            finished_at: r.get("finished_at"),
        })
        .collect()
}

/// What is wrong with a stored job's fields for its state (empty: nothing).
pub(super) fn inconsistencies(j: &Stored) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(state) = JobState::parse(&j.state) else {
        return vec![format!("state {:?} is no JobState", j.state)];
    };
    let mut want = |ok: bool, what: &str| {
        if !ok {
            bad.push(format!("{}: {what}", j.state));
        }
    };
    want(j.resume_count >= 0, "resume_count >= 0");
    match state {
        JobState::Preempted => want(false, "never stored (a preempted job is requeued)"),
        JobState::Queued => {
            want(j.pool_id.is_none() && j.node.is_none(), "no placement");
            want(j.handle.is_none() && j.started_at.is_none(), "not started");
            want(j.stop_reason.is_none(), "no stop pending");
        }
        JobState::Admitted | JobState::Starting => {
            want(j.pool_id.is_some() && j.node.is_some(), "a placement")
        }
        JobState::Running => {
            want(j.pool_id.is_some() && j.node.is_some(), "a placement");
            want(j.handle.is_some() && j.started_at.is_some(), "a handle");
        }
        JobState::Preempting => {
            want(j.pool_id.is_some() && j.node.is_some(), "a placement");
            want(j.stop_reason.is_some(), "a stop reason");
        }
        JobState::Succeeded | JobState::Failed | JobState::Aborted | JobState::Lost => {
            want(j.finished_at.is_some(), "finished_at");
            want(j.handle.is_none(), "no handle");
            if state == JobState::Succeeded {
                want(j.exit_code == Some(0), "exit code 0");
            }
        }
    }
    bad
}

/// Each job's stored transitions (notes, where from = to, left out) chain from `queued` to
/// its state; empty when they do.
pub(super) async fn broken_chains(app: &TestApp, jobs: &[Stored]) -> Vec<String> {
    let events =
        sqlx::query("SELECT job_id, from_state, to_state, detail FROM job_events ORDER BY at, id")
            .fetch_all(&app.store().pool)
            .await
            .unwrap();
    let mut by_job: HashMap<String, Vec<(Option<String>, String, String)>> = HashMap::new();
    for e in &events {
        by_job.entry(e.get("job_id")).or_default().push((
            e.get("from_state"),
            e.get("to_state"),
            e.get::<Option<String>, _>("detail").unwrap_or_default(),
        ));
    }
    let mut broken = Vec::new();
    for j in jobs {
        let evs = by_job.remove(&j.id).unwrap_or_default();
        let mut at: Option<String> = None;
        let mut ok = true;
        for (from, to, _) in &evs {
            if from.as_deref() == Some(to.as_str()) {
                continue;
            }
            if *from != at {
                ok = false;
            }
            at = Some(to.clone());
        }
        if !ok || at.as_deref() != Some(j.state.as_str()) {
            broken.push(format!("{} ({}): {evs:?}", j.id, j.state));
        }
    }
    // Events of a job that is not stored: no key refuses them since migration 0023, so the
    // writes themselves must never leave one, whenever the server dies.
    let mut orphans: Vec<_> = by_job.into_iter().collect();
    orphans.sort();
    for (job, evs) in orphans {
        broken.push(format!("{job} (no such job): {evs:?}"));
    }
    broken
}

/// One run of an abort callback, as its line in the callbacks' log tells it.
pub(super) struct CallbackRun {
    pub(super) job: String,
    /// The job's resume count: the stop's attempt.
    pub(super) attempt: String,
    /// `preempt`, `abort` or `max_runtime`.
    pub(super) reason: String,
    /// `bash` or `python`.
    pub(super) kind: String,
}

pub(super) fn callback_runs(log: &str) -> Vec<CallbackRun> {
    log.lines()
        .map(|line| {
            let mut parts = line.split_whitespace().map(str::to_string);
            let mut next = || parts.next().unwrap_or_default();
            CallbackRun {
                job: next(),
                attempt: next(),
                reason: next(),
                kind: next(),
            }
        })
        .collect()
}

/// A stored job event: (at, from, to, detail).
type Event = (i64, Option<String>, String, String);

/// What the stops for the maximum runtime came to.
#[derive(Default)]
pub(super) struct RuntimeStops {
    /// Stops stored (the driver's `running → running` note "reached its maximum runtime").
    pub(super) stops: usize,
    /// Jobs that ended `failed` for such a stop.
    pub(super) failed: usize,
    /// Abort callbacks run for such a stop.
    pub(super) callbacks: usize,
    pub(super) faults: Vec<String>,
}

/// The stops for the maximum runtime, judged from each job's events: at most one per job, not
/// before its limit; the next transition after it (the only one) ends the job `failed`, with a
/// detail saying it exceeded its maximum runtime, or `aborted` when an abort came after it:
/// never requeued, never `succeeded`. A job of the load with a limit (`r-`, whose command runs
/// far longer) that was not aborted was stopped for it. A callback run for `max_runtime` belongs
/// to a job stopped for it.
pub(super) async fn runtime_stops(
    app: &TestApp,
    jobs: &[Stored],
    runs: &[CallbackRun],
) -> RuntimeStops {
    let events = sqlx::query(
        "SELECT job_id, at, from_state, to_state, detail FROM job_events ORDER BY at, id",
    )
    .fetch_all(&app.store().pool)
    .await
    .unwrap();
    let mut by_job: HashMap<String, Vec<Event>> = HashMap::new();
    for e in &events {
        by_job.entry(e.get("job_id")).or_default().push((
            e.get("at"),
            e.get("from_state"),
            e.get("to_state"),
            e.get::<Option<String>, _>("detail").unwrap_or_default(),
        ));
    }
    let mut out = RuntimeStops::default();
    let mut limited: HashSet<&str> = HashSet::new();
    for j in jobs {
        let mut fault = |what: String| out.faults.push(format!("{} ({}): {what}", j.id, j.name));
        let mut stopped_at: Option<i64> = None;
        let mut aborted_after = false;
        let mut ended: Option<String> = None;
        for (at, from, to, detail) in by_job.get(&j.id).map(Vec::as_slice).unwrap_or_default() {
            if from.as_deref() == Some(to.as_str()) {
                if detail.starts_with("reached its maximum runtime") {
                    out.stops += 1;
                    if stopped_at.is_some() {
                        fault(format!("stopped for its maximum runtime again at {at}"));
                    }
                    if to != "running" {
                        fault(format!("stopped for its maximum runtime while {to}"));
                    }
                    match (j.started_at, j.max_runtime_ms) {
                        (Some(s), Some(m)) if *at < s + m => fault(format!(
                            "stopped for its maximum runtime of {m} ms at {at}, started at {s}"
                        )),
                        (_, None) => fault("stopped for a maximum runtime it has not".into()),
                        _ => {}
                    }
                    stopped_at = Some(*at);
                } else if stopped_at.is_some() && detail.starts_with("aborted by") {
                    aborted_after = true;
                }
                continue;
            }
            if stopped_at.is_none() {
                continue;
            }
            if let Some(end) = &ended {
                fault(format!(
                    "{from:?} → {to} ({detail}) after its runtime stop ended it {end}"
                ));
                continue;
            }
            let legal = if aborted_after {
                to == "aborted"
            } else {
                to == "failed" && detail.starts_with("exceeded its maximum runtime")
            };
            if !legal {
                fault(format!("its runtime stop ended {from:?} → {to} ({detail})"));
            }
            if to == "failed" {
                out.failed += 1;
            }
            ended = Some(to.clone());
        }
        if stopped_at.is_some() {
            limited.insert(j.id.as_str());
            if ended.is_none() {
                fault(format!(
                    "its runtime stop never ended it (it is {})",
                    j.state
                ));
            }
        } else if j.name.starts_with("r-") && j.state != "aborted" {
            fault(format!(
                "never stopped for its maximum runtime: {} ({:?})",
                j.state, j.detail
            ));
        }
    }
    for run in runs.iter().filter(|r| r.reason == "max_runtime") {
        out.callbacks += 1;
        if !limited.contains(run.job.as_str()) {
            out.faults.push(format!(
                "{}: a {} callback for a maximum runtime it was never stopped for",
                run.job, run.kind
            ));
        }
    }
    out
}

/// Processes of jobs that ended by `ended` (read before the processes were listed): none may
/// run. And no job has two wrappers. (An abort callback run twice shows in the callbacks' log.)
pub(super) fn process_faults(
    jobs_dir: &Path,
    ended: &HashSet<String>,
) -> (Vec<String>, Vec<String>) {
    let procs = job_processes(jobs_dir);
    let orphans = procs
        .iter()
        .filter(|p| ended.contains(&p.job_id))
        .map(|p| format!("{p:?}"))
        .collect();
    let mut wrappers: HashMap<&str, Vec<u32>> = HashMap::new();
    for p in procs.iter().filter(|p| p.wrapper) {
        wrappers.entry(&p.job_id).or_default().push(p.pid);
    }
    let doubled = wrappers
        .into_iter()
        .filter(|(_, pids)| pids.len() > 1)
        .map(|(job, pids)| format!("{job}: wrappers {pids:?}"))
        .collect();
    (orphans, doubled)
}

pub(super) async fn ended_jobs(app: &TestApp) -> HashSet<String> {
    rows(app)
        .await
        .into_iter()
        .filter(|j| JobState::parse(&j.state).is_some_and(JobState::is_terminal))
        .map(|j| j.id)
        .collect()
}
