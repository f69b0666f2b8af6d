//! The real server, killed with SIGKILL fifty times under load: nothing a 201 answered for is
//! lost, nothing is doubled (jobs, abort callbacks, job processes), every job ends in a legal,
//! consistent state, and no job process outlives what the store considers live.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::OpenOptions;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use sqlx::Row as _;

use app::model::JobState;

use crate::both_stores;
use crate::common::{job_user, Kind, TestApp};
use crate::jobs::{
    group_queue, id, node, pool, profile, setup, small_queue, submit, wait_state, Setup,
};

both_stores!(
    nothing_lost_nothing_doubled_across_fifty_kills,
    a_started_job_whose_running_was_not_stored_is_adopted,
    a_preempted_job_killed_while_the_scheduler_was_down_is_requeued,
    an_exit_of_a_job_ended_meanwhile_is_not_written_twice
);

/// Kills the job processes of a jobs folder when dropped (a test that fails leaves none).
struct KillJobsOnDrop(PathBuf);

impl Drop for KillJobsOnDrop {
    fn drop(&mut self) {
        kill_job_processes(&self.0);
    }
}

const KILLS: usize = 50;

/// A job process of this test, found through `/proc` by its `HOME` under the test's jobs folder.
#[derive(Debug)]
pub(crate) struct JobProc {
    pub(crate) pid: u32,
    pub(crate) pgrp: u32,
    pub(crate) job_id: String,
    /// The executor's wrapper (the job's process group leader, `switchyard-job`).
    pub(crate) wrapper: bool,
}

/// Every live (not zombie) process whose `HOME` is a job folder under `jobs_dir`.
pub(crate) fn job_processes(jobs_dir: &Path) -> Vec<JobProc> {
    let home = format!("HOME={}/", jobs_dir.display());
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<String> = environ
            .split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).to_string())
            .collect();
        if !vars.iter().any(|v| v.starts_with(&home)) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if matches!(fields.first(), Some(&"Z") | Some(&"X") | Some(&"x") | None) {
            continue;
        }
        let pgrp = fields.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).to_string())
            .collect();
        let job_id = vars
            .iter()
            .find_map(|v| v.strip_prefix("SWITCHYARD_JOB_ID="))
            .unwrap_or_default()
            .to_string();
        out.push(JobProc {
            pid,
            pgrp,
            job_id,
            // (Its leader: a child it forked shows its command line until it execs.)
            wrapper: pgrp == pid && args.get(3).is_some_and(|a| a == "switchyard-job"),
        });
    }
    out
}

/// SIGKILL to every job process of `jobs_dir` and their groups, until none is left (2 s at most).
pub(crate) fn kill_job_processes(jobs_dir: &Path) {
    for _ in 0..40 {
        let procs = job_processes(jobs_dir);
        if procs.is_empty() {
            return;
        }
        for p in procs {
            for target in [format!("-{}", p.pgrp), p.pid.to_string()] {
                let _ = Command::new("kill")
                    .args(["-s", "KILL", "--", &target])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The real `switchyard serve` on the test's database and jobs folder. Dropping it kills the
/// server and every job process it left, so nothing outlives the test, even when it fails.
pub(crate) struct RealServer {
    child: Option<Child>,
    url: String,
    pub(crate) addr: String,
    pub(crate) jobs_dir: PathBuf,
    log: PathBuf,
    pub(crate) starts: usize,
}

impl RealServer {
    pub(crate) fn new(url: &str, jobs_dir: &Path, log: &Path) -> RealServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        RealServer {
            child: None,
            url: url.to_string(),
            addr: format!("127.0.0.1:{port}"),
            jobs_dir: jobs_dir.to_path_buf(),
            log: log.to_path_buf(),
            starts: 0,
        }
    }

    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts the server and waits until `/readyz` answers 200 (30 s at most).
    pub(crate) async fn start(&mut self, http: &reqwest::Client) {
        assert!(self.child.is_none(), "the server is already running");
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let (uid, gid) = job_user();
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("--database-url")
            .arg(&self.url)
            .arg("serve")
            .arg("--listen")
            .arg(&self.addr)
            .arg("--jobs-dir")
            .arg(&self.jobs_dir)
            .arg("--allow-local-pools=true")
            .arg("--job-uid")
            .arg(uid.to_string())
            .arg("--job-gid")
            .arg(gid.to_string())
            .args(["--scheduler-tick-ms", "100"])
            .args(["--min-runtime-ms", "0"])
            .args(["--stop-grace-ms", "500"])
            .args(["--sim-checkpoint-ms", "50"])
            .args(["--log-format", "text"])
            .env_remove("DATABASE_URL")
            .env_remove("SWITCHYARD_CONFIG")
            .env("RUST_LOG", "info,sqlx=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        self.starts += 1;
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("{}/readyz", self.base());
        loop {
            if let Ok(r) = http.get(&url).send().await {
                if r.status() == reqwest::StatusCode::OK {
                    return;
                }
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "the server exited ({status}) before it was ready:\n{}",
                    self.log_tail()
                );
            }
            if Instant::now() > deadline {
                panic!("the server was not ready in 30 s:\n{}", self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL to the server (its jobs go on running, as after a real crash).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        self.kill();
        kill_job_processes(&self.jobs_dir);
    }
}

/// A submit and what became of it.
#[derive(Clone)]
struct Submit {
    key: String,
    token: String,
    body: Value,
}

#[derive(Default)]
struct Book {
    /// Submits not answered yet (sent or about to be): retried with the same key.
    pending: BTreeMap<String, Submit>,
    /// Key → the job id a 201 answered with.
    answered: HashMap<String, String>,
    /// Keys whose retry was answered as a replay.
    replayed: usize,
    aborts: usize,
    /// Non-201 answers that were not connection failures (status, body).
    refused: Vec<String>,
}

struct Load {
    http: reqwest::Client,
    base: String,
    book: Arc<Mutex<Book>>,
    member: String,
    admin: String,
    vision: String,
    nlp: String,
    callbacks: PathBuf,
    next: usize,
}

/// The outcome of one request: answered (status, body, replayed) or unknown (no answer).
async fn send_submit(
    http: &reqwest::Client,
    base: &str,
    s: &Submit,
) -> Option<(reqwest::StatusCode, Value, bool)> {
    let r = http
        .post(format!("{base}/api/v1/jobs"))
        .bearer_auth(&s.token)
        .header("Idempotency-Key", &s.key)
        .json(&s.body)
        .send()
        .await
        .ok()?;
    let status = r.status();
    let replayed = r.headers().contains_key("idempotent-replayed");
    let body = r.json::<Value>().await.ok()?;
    Some((status, body, replayed))
}

impl Load {
    /// Sends a submit; it stays pending (to retry) until a 201 answers it.
    async fn submit(&self, s: Submit) {
        self.book
            .lock()
            .unwrap()
            .pending
            .insert(s.key.clone(), s.clone());
        let Some((status, body, replayed)) = send_submit(&self.http, &self.base, &s).await else {
            return;
        };
        let mut book = self.book.lock().unwrap();
        if status == reqwest::StatusCode::CREATED {
            book.pending.remove(&s.key);
            if replayed {
                book.replayed += 1;
            }
            let job_id = body["id"].as_str().unwrap_or_default().to_string();
            if let Some(before) = book.answered.insert(s.key.clone(), job_id.clone()) {
                assert_eq!(before, job_id, "two answers for one key {}", s.key);
            }
        } else if !status.is_server_error() {
            book.pending.remove(&s.key);
            book.refused.push(format!("{status}: {body}"));
        }
    }

    /// Retries every pending submit once.
    async fn retry_pending(&self) {
        let pending: Vec<Submit> = self
            .book
            .lock()
            .unwrap()
            .pending
            .values()
            .cloned()
            .collect();
        for s in pending {
            self.submit(s).await;
        }
    }

    fn vision_job(&mut self) -> Submit {
        self.next += 1;
        let key = format!("v-{}", self.next);
        let abort = format!(
            "echo \"$SWITCHYARD_JOB_ID $SWITCHYARD_RESUME_COUNT $SWITCHYARD_STOP_REASON\" >> {log}; echo \"$SWITCHYARD_RESUME_COUNT\" > \"$SWITCHYARD_CHECKPOINT_DIR/saved\"; sleep 0.3",
            log = self.callbacks.display()
        );
        Submit {
            key: key.clone(),
            token: self.member.clone(),
            body: json!({"queue_id": self.vision, "name": key, "command": "sleep 1", "gpu_milli": 1000,
                "duration_ms": 1000, "checkpoint_dir": "ckpt",
                "abort": {"kind": "bash", "command": abort, "timeout_ms": 5000}}),
        }
    }

    fn nlp_job(&mut self) -> Submit {
        self.next += 1;
        let key = format!("n-{}", self.next);
        let abort = format!(
            "echo \"$SWITCHYARD_JOB_ID $SWITCHYARD_RESUME_COUNT $SWITCHYARD_STOP_REASON\" >> {log}",
            log = self.callbacks.display()
        );
        Submit {
            key: key.clone(),
            token: self.admin.clone(),
            body: json!({"queue_id": self.nlp, "name": key, "command": "sleep 0.4", "gpu_milli": 1000,
                "abort": {"kind": "bash", "command": abort, "timeout_ms": 5000}}),
        }
    }

    /// Aborts one of the recently answered jobs (whatever its state; 409s are expected).
    async fn abort_one(&self, rng: &mut StdRng) {
        let ids: Vec<String> = {
            let book = self.book.lock().unwrap();
            let mut ids: Vec<&String> = book.answered.values().collect();
            ids.sort();
            ids.iter().rev().take(6).map(|s| s.to_string()).collect()
        };
        if ids.is_empty() {
            return;
        }
        let job = &ids[rng.gen_range(0..ids.len())];
        let sent = self
            .http
            .post(format!("{}/api/v1/jobs/{job}/abort", self.base))
            .bearer_auth(&self.admin)
            .json(&json!({}))
            .send()
            .await;
        if let Ok(r) = sent {
            if r.status() == reqwest::StatusCode::OK {
                self.book.lock().unwrap().aborts += 1;
            }
        }
    }

    /// One round of load: pending retries, two borrowing jobs, often a reclaiming job, sometimes
    /// an abort.
    async fn round(&mut self, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        self.retry_pending().await;
        for _ in 0..2 {
            let v = self.vision_job();
            self.submit(v).await;
            tokio::time::sleep(Duration::from_millis(rng.gen_range(10..60))).await;
        }
        if rng.gen_bool(0.7) {
            let n = self.nlp_job();
            self.submit(n).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(10..60))).await;
        if rng.gen_bool(0.5) {
            self.abort_one(&mut rng).await;
        }
    }
}

/// One stored job, as the checks read it.
#[derive(Debug)]
struct Stored {
    id: String,
    name: String,
    state: String,
    stop_reason: Option<String>,
    pool_id: Option<String>,
    node: Option<i64>,
    handle: Option<String>,
    exit_code: Option<i64>,
    resume_count: i64,
    started_at: Option<i64>,
    finished_at: Option<i64>,
}

async fn rows(app: &TestApp) -> Vec<Stored> {
    sqlx::query("SELECT id, name, state, stop_reason, pool_id, node, handle, exit_code, resume_count, started_at, finished_at FROM jobs")
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
            resume_count: r.get("resume_count"),
            started_at: r.get("started_at"),
            finished_at: r.get("finished_at"),
        })
        .collect()
}

/// What is wrong with a stored job's fields for its state (empty: nothing).
fn inconsistencies(j: &Stored) -> Vec<String> {
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
async fn broken_chains(app: &TestApp, jobs: &[Stored]) -> Vec<String> {
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
    broken
}

/// Processes of jobs that ended by `ended` (read before the processes were listed): none may
/// run. And no job has two wrappers. (An abort callback run twice shows in the callbacks' log.)
fn process_faults(jobs_dir: &Path, ended: &HashSet<String>) -> (Vec<String>, Vec<String>) {
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

async fn ended_jobs(app: &TestApp) -> HashSet<String> {
    rows(app)
        .await
        .into_iter()
        .filter(|j| JobState::parse(&j.state).is_some_and(JobState::is_terminal))
        .map(|j| j.id)
        .collect()
}

/// A shared local pool of 4 GPUs granted to the tenant, a simulated pool of 2; the member's
/// `vision` group (1 GPU reserved, may borrow up to 4, on both pools) and the `nlp` group
/// (3 GPUs reserved on the local pool, which it reclaims by preempting vision's borrowers).
async fn seed(app: &TestApp, s: &Setup, tenant_id: &str) -> (String, String) {
    let root = app.seed_platform_admin().await;
    let p = app
        .post(
            "/api/v1/pools",
            &root,
            json!({"name": "here", "executor": "local", "shared": true, "nodes": [node("localhost", 4)]}),
        )
        .await;
    assert_eq!(p.status, StatusCode::CREATED, "{}", p.text);
    let local = id(&p.body);
    let g = app
        .call(
            axum::http::Method::PUT,
            &format!("/api/v1/pools/{local}/grants/{tenant_id}"),
            Some(&root),
            Some(json!({ "reservation_milli": 4000 })),
        )
        .await;
    assert_eq!(g.status, StatusCode::OK, "{}", g.text);
    let sim = pool(app, s, "sim", "simulated", json!([node("s1", 2)])).await;
    let flex = profile(
        app,
        s,
        json!({"name": "flex", "min_gpu_milli": 125, "max_gpu_milli": 2000}),
    )
    .await;
    let vision = group_queue(
        app,
        s,
        "vision",
        json!({"reservation_milli": 1000, "limit_milli": 6000, "over_quota_weight": 1}),
        &flex,
        &[&local, &sim],
        true,
    )
    .await;
    let nlp = group_queue(
        app,
        s,
        "nlp",
        json!({"reservation_milli": 3000, "limit_milli": 3000, "over_quota_weight": 1}),
        &flex,
        &[&local],
        false,
    )
    .await;
    (vision, nlp)
}

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

    // Abort callbacks: at most one per stop (a job's attempt).
    let log = std::fs::read_to_string(&callbacks).unwrap();
    let mut per_stop: BTreeMap<(String, String), usize> = BTreeMap::new();
    for line in log.lines() {
        let mut parts = line.split_whitespace();
        let job = parts.next().unwrap_or_default().to_string();
        let attempt = parts.next().unwrap_or_default().to_string();
        *per_stop.entry((job, attempt)).or_default() += 1;
    }
    let doubled_callbacks: Vec<String> = per_stop
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((job, attempt), n)| format!("{job} attempt {attempt}: {n} runs"))
        .collect();

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
        "crash test ({kind:?}, seed {seed}): kills={KILLS} starts={} jobs={} answered={} replayed={} aborts={} preemptions={} requeues={requeues} callbacks={} states={states:?} ran_on={per_executor:?}",
        server.starts,
        jobs.len(),
        book.answered.len(),
        book.replayed,
        book.aborts,
        preempt_rows.len(),
        log.lines().count(),
    );
    println!(
        "crash test ({kind:?}): lost: missing={} state_lost={} | doubled: jobs={} callbacks={} processes={} requeues={} | orphans={} inconsistent={} broken_chains={} | kill phase {:.1} s, total {:.1} s",
        missing.len(),
        lost_state.len(),
        doubled_jobs.len(),
        doubled_callbacks.len(),
        doubled_processes.len(),
        over_requeued.len(),
        orphans.len(),
        inconsistent.len(),
        chains.len(),
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

/// The scheduler dies after committing `starting` and before committing `running` (the
/// process was started; the store never learned its handle). The restarted scheduler finds
/// the same process and marks the job running; it used to mark it `lost` at once, with its
/// process still running and its GPUs free for the next job.
async fn a_started_job_whose_running_was_not_stored_is_adopted(kind: Kind) {
    let mut app = TestApp::with_scheduler(kind).await;
    let tenant_id = app.seed_tenant("acme").await;
    let s = Setup {
        admin: app.login("acme", "admin").await,
        member: app.login("acme", "member").await,
    };
    let (_, nlp) = seed(&app, &s, &tenant_id).await;
    let jobs_dir = app.jobs_dir.as_ref().unwrap().path().to_path_buf();
    let _cleanup = KillJobsOnDrop(jobs_dir.clone());
    let job = submit(
        &app,
        &s.admin,
        json!({"queue_id": nlp, "name": "long", "command": "sleep 60", "gpu_milli": 1000}),
    )
    .await;
    wait_state(&app, &s.admin, &job, "running").await;
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
    let mut app = TestApp::with_scheduler(kind).await;
    let tenant_id = app.seed_tenant("acme").await;
    let s = Setup {
        admin: app.login("acme", "admin").await,
        member: app.login("acme", "member").await,
    };
    let (_, nlp) = seed(&app, &s, &tenant_id).await;
    let jobs_dir = app.jobs_dir.as_ref().unwrap().path().to_path_buf();
    let _cleanup = KillJobsOnDrop(jobs_dir.clone());
    let job = submit(
        &app,
        &s.admin,
        json!({"queue_id": nlp, "name": "borrower", "command": "sleep 60", "gpu_milli": 1000}),
    )
    .await;
    wait_state(&app, &s.admin, &job, "running").await;
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
