//! The real server, killed with SIGKILL fifty times under load: nothing a 201 answered for is
//! lost, nothing is doubled (jobs, abort callbacks, job processes), every job ends in a legal,
//! consistent state, and no job process outlives what the store considers live. The stops
//! include preemptions, aborts and stops for a job's maximum runtime (which end it `failed`);
//! the abort callbacks are bash and python, and each runs at most once per stop.
//!
//! `server`: the real server process and the job processes it leaves; `load`: the seeded
//! groups and the rounds of submits and aborts; `checks`: what the store holds, read back and
//! judged.

mod checks;
mod load;
mod server;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use sqlx::Row as _;

use app::model::JobState;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::jobs::{setup, small_queue, submit, wait_state, Setup};

use checks::{
    broken_chains, callback_runs, ended_jobs, inconsistencies, process_faults, rows, runtime_stops,
    Stored,
};
use load::{seed, Book, Load};
use server::{job_processes, kill_job_processes, KillJobsOnDrop, RealServer};

both_stores!(
    nothing_lost_nothing_doubled_across_fifty_kills,
    a_started_job_whose_running_was_not_stored_is_adopted,
    a_preempted_job_killed_while_the_scheduler_was_down_is_requeued,
    an_exit_of_a_job_ended_meanwhile_is_not_written_twice
);

const KILLS: usize = 50;

async fn nothing_lost_nothing_doubled_across_fifty_kills(kind: Kind) {
    let started = Instant::now();
    let app = TestApp::with_settings(kind, |c| c.scheduler.allow_local_pools = true).await;
    let tenant_id = app.seed_tenant("acme").await;
    let s = Setup {
        admin: app.login("acme", "admin").await,
        member: app.login("acme", "member").await,
    };
    let (vision, nlp) = seed(&app, &s, &tenant_id).await;

    let jobs_dir = tempfile::tempdir().unwrap();
    // The callbacks run as the job user: their log lives in a folder anyone may write.
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let callbacks = shared.path().join("callbacks.log");
    std::fs::write(&callbacks, "").unwrap();
    std::fs::set_permissions(&callbacks, std::fs::Permissions::from_mode(0o666)).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut server = RealServer::new(
        &app.db.url,
        jobs_dir.path(),
        &logs.path().join("server.log"),
    );
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    server.start(&http).await;

    let seed: u64 = rand::random();
    let mut rng = StdRng::seed_from_u64(seed);
    let book = Arc::new(Mutex::new(Book::default()));
    let load = Arc::new(tokio::sync::Mutex::new(Load {
        http: http.clone(),
        base: server.base(),
        book: book.clone(),
        member: s.member.clone(),
        admin: s.admin.clone(),
        vision,
        nlp,
        callbacks: callbacks.clone(),
        next: 0,
    }));
    // (Sets: a process seen before several kills is one fault.)
    let mut orphans: BTreeSet<String> = BTreeSet::new();
    let mut doubled_processes: BTreeSet<String> = BTreeSet::new();
    for _ in 0..KILLS {
        let round_seed: u64 = rng.gen();
        let task = tokio::spawn({
            let load = load.clone();
            async move {
                let mut load = load.lock().await;
                load.round(round_seed).await;
            }
        });
        tokio::time::sleep(Duration::from_millis(rng.gen_range(50..=400))).await;
        // Before the kill: what the store says has ended, then the processes.
        let ended = ended_jobs(&app).await;
        let (o, d) = process_faults(jobs_dir.path(), &ended);
        orphans.extend(o);
        doubled_processes.extend(d);
        server.kill();
        // Whatever the load was sending when the server died stays pending, to be retried.
        task.abort();
        let _ = task.await;
        server.start(&http).await;
    }
    let kill_phase = started.elapsed();

    // Settle: every submit answered, every job ended.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        load.lock().await.retry_pending().await;
        let jobs = rows(&app).await;
        let pending = book.lock().unwrap().pending.len();
        let live = jobs
            .iter()
            .filter(|j| !JobState::parse(&j.state).is_some_and(JobState::is_terminal))
            .count();
        if pending == 0 && live == 0 {
            break;
        }
        if Instant::now() > deadline {
            let stuck: Vec<String> = jobs
                .iter()
                .filter(|j| !JobState::parse(&j.state).is_some_and(JobState::is_terminal))
                .map(|j| format!("{} {} {:?}", j.id, j.state, j.stop_reason))
                .collect();
            panic!(
                "not settled 40 s after the last restart: {pending} submits unanswered, live jobs {stuck:?}\n{}",
                server.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ended = ended_jobs(&app).await;
    let (o, d) = process_faults(jobs_dir.path(), &ended);
    orphans.extend(o);
    doubled_processes.extend(d);

    // Lost and doubled jobs.
    let jobs = rows(&app).await;
    let book = std::mem::take(&mut *book.lock().unwrap());
    let mut by_name: HashMap<&str, Vec<&Stored>> = HashMap::new();
    for j in &jobs {
        by_name.entry(j.name.as_str()).or_default().push(j);
    }
    let ids: HashSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    let missing: Vec<String> = book
        .answered
        .iter()
        .filter(|(key, id)| {
            !ids.contains(id.as_str()) || by_name.get(key.as_str()).is_none_or(|v| v[0].id != **id)
        })
        .map(|(key, id)| format!("{key} → {id}"))
        .collect();
    let doubled_jobs: Vec<String> = by_name
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(name, v)| format!("{name}: {} jobs", v.len()))
        .collect();
    let lost_state: Vec<String> = jobs
        .iter()
        .filter(|j| j.state == "lost")
        .map(|j| j.id.clone())
        .collect();
    let inconsistent: Vec<String> = jobs
        .iter()
        .flat_map(|j| {
            inconsistencies(j)
                .into_iter()
                .map(move |b| format!("{}: {b}", j.id))
        })
        .collect();
    let chains = broken_chains(&app, &jobs).await;

    // Preemptions: a job is requeued at most once per preemption of it.
    let preempt_rows = sqlx::query("SELECT victim_job_id FROM preemptions")
        .fetch_all(&app.store().pool)
        .await
        .unwrap();
    let mut preempted: HashMap<String, i64> = HashMap::new();
    for r in &preempt_rows {
        *preempted.entry(r.get("victim_job_id")).or_default() += 1;
    }
    let over_requeued: Vec<String> = jobs
        .iter()
        .filter(|j| j.resume_count > preempted.get(&j.id).copied().unwrap_or(0))
        .map(|j| format!("{}: resumed {} times", j.id, j.resume_count))
        .collect();
    let requeues: i64 = jobs.iter().map(|j| j.resume_count).sum();

    // Abort callbacks: at most one per stop (a job's attempt), python ones as bash ones.
    let log = std::fs::read_to_string(&callbacks).unwrap();
    let runs = callback_runs(&log);
    let mut per_stop: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for run in &runs {
        *per_stop.entry((&run.job, &run.attempt)).or_default() += 1;
    }
    let doubled_callbacks: Vec<String> = per_stop
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((job, attempt), n)| format!("{job} attempt {attempt}: {n} runs"))
        .collect();
    let python_callbacks = runs.iter().filter(|r| r.kind == "python").count();

    // Stops for the maximum runtime: each ends its job `failed` (or `aborted`, when an abort
    // came after it), never requeued or `succeeded`.
    let runtime = runtime_stops(&app, &jobs, &runs).await;

    // What the load must have covered, so the test cannot silently stop covering it.
    let mut uncovered = Vec::new();
    if python_callbacks == 0 {
        uncovered.push("no python abort callback ran".to_string());
    }
    if runtime.stops == 0 {
        uncovered.push("no job was stopped for its maximum runtime".to_string());
    }

    let per_executor: BTreeMap<String, i64> = sqlx::query(
        "SELECT p.executor, COUNT(*) AS n FROM jobs j JOIN pools p ON p.id = j.pool_id GROUP BY p.executor",
    )
    .fetch_all(&app.store().pool)
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get("executor"), r.get("n")))
    .collect();
    let states: BTreeMap<&str, usize> = jobs.iter().fold(BTreeMap::new(), |mut m, j| {
        *m.entry(j.state.as_str()).or_default() += 1;
        m
    });
    println!(
        "crash test ({kind:?}, seed {seed}): kills={KILLS} starts={} jobs={} answered={} replayed={} aborts={} preemptions={} requeues={requeues} callbacks={} python_callbacks={python_callbacks} runtime_stops={} runtime_failed={} runtime_callbacks={} states={states:?} ran_on={per_executor:?}",
        server.starts,
        jobs.len(),
        book.answered.len(),
        book.replayed,
        book.aborts,
        preempt_rows.len(),
        runs.len(),
        runtime.stops,
        runtime.failed,
        runtime.callbacks,
    );
    println!(
        "crash test ({kind:?}): lost: missing={} state_lost={} | doubled: jobs={} callbacks={} processes={} requeues={} | orphans={} inconsistent={} broken_chains={} runtime_faults={} | kill phase {:.1} s, total {:.1} s",
        missing.len(),
        lost_state.len(),
        doubled_jobs.len(),
        doubled_callbacks.len(),
        doubled_processes.len(),
        over_requeued.len(),
        orphans.len(),
        inconsistent.len(),
        chains.len(),
        runtime.faults.len(),
        kill_phase.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let orphans: Vec<String> = orphans.into_iter().collect();
    let doubled_processes: Vec<String> = doubled_processes.into_iter().collect();
    let report = [
        ("refused submits", &book.refused),
        ("answered but missing", &missing),
        ("ended lost", &lost_state),
        ("doubled jobs", &doubled_jobs),
        ("doubled abort callbacks", &doubled_callbacks),
        ("doubled job processes", &doubled_processes),
        ("requeued more often than preempted", &over_requeued),
        ("processes of ended jobs", &orphans),
        ("inconsistent fields", &inconsistent),
        ("broken event chains", &chains),
        ("runtime-limit stops", &runtime.faults),
        ("not covered", &uncovered),
    ];
    let faults: Vec<String> = report
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(what, v)| format!("{what} ({}): {:?}", v.len(), &v[..v.len().min(5)]))
        .collect();
    assert!(
        faults.is_empty(),
        "after {KILLS} kills (seed {seed}):\n{}",
        faults.join("\n")
    );
    drop(server);
    app.finish().await;
}

/// A scheduler with the crash test's pools, and one local job (`sleep 60`) of `name` running
/// on them; the guard kills job processes left behind.
async fn a_running_local_job(
    kind: Kind,
    name: &str,
) -> (TestApp, Setup, String, std::path::PathBuf, KillJobsOnDrop) {
    let app = TestApp::with_scheduler(kind).await;
    let tenant_id = app.seed_tenant("acme").await;
    let s = Setup {
        admin: app.login("acme", "admin").await,
        member: app.login("acme", "member").await,
    };
    let (_, nlp) = seed(&app, &s, &tenant_id).await;
    let jobs_dir = app.jobs_dir.as_ref().unwrap().path().to_path_buf();
    let cleanup = KillJobsOnDrop(jobs_dir.clone());
    let job = submit(
        &app,
        &s.admin,
        json!({"queue_id": nlp, "name": name, "command": "sleep 60", "gpu_milli": 1000}),
    )
    .await;
    wait_state(&app, &s.admin, &job, "running").await;
    (app, s, job, jobs_dir, cleanup)
}

/// The scheduler dies after committing `starting` and before committing `running` (the
/// process was started; the store never learned its handle). The restarted scheduler finds
/// the same process and marks the job running; it used to mark it `lost` at once, with its
/// process still running and its GPUs free for the next job.
async fn a_started_job_whose_running_was_not_stored_is_adopted(kind: Kind) {
    let (mut app, s, job, jobs_dir, _cleanup) = a_running_local_job(kind, "long").await;
    let handle = |app: &TestApp| {
        let pool = app.store().pool.clone();
        let job = job.clone();
        async move {
            sqlx::query_scalar::<_, Option<String>>("SELECT handle FROM jobs WHERE id = $1")
                .bind(job)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let pid = handle(&app).await.expect("a handle");
    // The crash: the scheduler stops, and the store is as it was before `running` committed.
    if let Some(d) = app.driver.take() {
        d.abort();
        let _ = d.await;
    }
    sqlx::query(
        "UPDATE jobs SET state = 'starting', handle = NULL, started_at = NULL WHERE id = $1",
    )
    .bind(&job)
    .execute(&app.store().pool)
    .await
    .unwrap();
    app.driver = Some(switchyard::start_scheduler(&app.state));
    wait_state(&app, &s.admin, &job, "running").await;
    assert_eq!(handle(&app).await, Some(pid.clone()), "the same process");
    let wrappers: Vec<u32> = job_processes(&jobs_dir)
        .iter()
        .filter(|p| p.wrapper && p.job_id == job)
        .map(|p| p.pid)
        .collect();
    assert_eq!(wrappers, [pid.parse::<u32>().unwrap()], "one copy runs");
    let r = app
        .post(&format!("/api/v1/jobs/{job}/abort"), &s.admin, json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    wait_state(&app, &s.admin, &job, "aborted").await;
    assert!(
        job_processes(&jobs_dir).is_empty(),
        "{:?}",
        job_processes(&jobs_dir)
    );
    app.finish().await;
}

/// The scheduler stored a preemption and sent the stop; the job's wrapper was killed with
/// SIGKILL (after the grace period), so it left no exit code, and the scheduler died before it
/// stored the stop's end. The restarted scheduler finds the process gone and ends the job as
/// the stored stop decides: requeued to resume. It used to end it `lost`.
async fn a_preempted_job_killed_while_the_scheduler_was_down_is_requeued(kind: Kind) {
    let (mut app, s, job, jobs_dir, _cleanup) = a_running_local_job(kind, "borrower").await;
    if let Some(d) = app.driver.take() {
        d.abort();
        let _ = d.await;
    }
    // What the dead scheduler had stored and sent.
    sqlx::query("UPDATE jobs SET state = 'preempting', stop_reason = 'preempt' WHERE id = $1")
        .bind(&job)
        .execute(&app.store().pool)
        .await
        .unwrap();
    kill_job_processes(&jobs_dir);
    assert!(job_processes(&jobs_dir).is_empty());
    app.driver = Some(switchyard::start_scheduler(&app.state));
    let d = app
        .wait_for(
            &format!("/api/v1/jobs/{job}"),
            &s.admin,
            "the job requeued",
            |b| b["job"]["resume_count"] == 1,
        )
        .await;
    let states: Vec<&str> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["to_state"].as_str().unwrap())
        .collect();
    assert!(
        states.contains(&"preempted") && !states.contains(&"lost"),
        "{states:?}"
    );
    let r = app
        .post(&format!("/api/v1/jobs/{job}/abort"), &s.admin, json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    wait_state(&app, &s.admin, &job, "aborted").await;
    app.finish().await;
}

/// Another writer ends a job between the driver's read of it and its write (as the late commit
/// of a server killed just as this one started does): the driver applies the executor's exit
/// again from a fresh read and writes no second transition. It used to write the job event and
/// audit entry of the transition its conditional update had skipped (the crash test found a
/// job with two `running → succeeded` events).
async fn an_exit_of_a_job_ended_meanwhile_is_not_written_twice(kind: Kind) {
    let app = TestApp::with_scheduler(kind).await;
    let s = setup(&app, "acme").await;
    let q = small_queue(&app, &s).await;
    let job = submit(
        &app,
        &s.member,
        json!({"queue_id": q, "name": "short", "command": "x", "gpu_milli": 1000, "duration_ms": 1500}),
    )
    .await;
    wait_state(&app, &s.member, &job, "running").await;
    // Held: on SQLite by the store's write lock, on PostgreSQL by a lock on the job's row. The
    // job exits meanwhile; the driver reads it `running` and waits to write.
    let mut tx = app.store().begin_write().await.unwrap();
    if let Kind::Postgres = kind {
        sqlx::query("SELECT id FROM jobs WHERE id = $1 FOR UPDATE")
            .bind(&job)
            .execute(&mut *tx.tx)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(2000)).await;
    // The other writer ends it first.
    sqlx::query("UPDATE jobs SET state = 'succeeded', exit_code = 0, finished_at = $1, updated_at = $1, handle = NULL WHERE id = $2")
        .bind(app.store().now())
        .bind(&job)
        .execute(&mut *tx.tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let count = |sql: &'static str| {
        let pool = app.store().pool.clone();
        let job = job.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .bind(job)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        count("SELECT COUNT(*) FROM job_events WHERE job_id = $1 AND to_state = 'succeeded'").await,
        0,
        "the driver wrote a transition that had already happened"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM audit_log WHERE target_id = $1 AND action = 'job.succeeded'")
            .await,
        0
    );
    app.finish().await;
}
