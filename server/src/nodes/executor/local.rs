//! The local executor: each attempt is a real process on this host, started with `bash -c` in
//! its own process group, in its own folder `root/<job id>/`. Its output goes to
//! `root/<job id>/output.log`; a small wrapper writes its exit code to `root/<job id>/exit_code`
//! so that a restarted control plane can learn how a job it adopted ended.
//!
//! A stop runs the job's abort callback (bounded by its timeout), then sends SIGTERM to the
//! whole process group, waits for the grace period and sends SIGKILL to what is left. Signals
//! go through bash's `kill` builtin, and liveness is read from `/proc` (falling back to
//! `kill -0`), so no unsafe code is needed.
//!
//! Every attempt known to the executor gets exactly one terminal event (`Exited`, `Stopped` or
//! `Lost`): the table of running jobs is the single point where the waiter of a process and a
//! stop decide who reports, under one lock.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::sandbox::{self, JobUser};
use super::{AbortKind, Adopt, Events, ExecEvent, Executor, Launch, StopReason};

/// The name of the log file in a job's folder.
const OUTPUT_FILE: &str = "output.log";
/// The name of the exit code file in a job's folder.
const EXIT_CODE_FILE: &str = "exit_code";
/// How often an adopted job (not our child: no wait possible) is checked.
const ADOPT_POLL: Duration = Duration::from_millis(200);
/// How often a stopping process group is checked for members.
const GROUP_POLL: Duration = Duration::from_millis(25);
/// How long to wait for a process group to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Runs the job's command (`$1`) in a child bash and records its exit code. The TERM trap keeps
/// this wrapper (the group leader, whose pid is the handle) alive until the job itself is gone;
/// it is a handler, not an ignore, so the job's own bash starts with the default disposition.
const WRAPPER: &str = r#"trap 'switchyard_term=1' TERM
bash -c "$1"
switchyard_code=$?
printf '%s\n' "$switchyard_code" > exit_code
exit "$switchyard_code""#;

/// Signals a process group through bash's `kill` builtin: `$1` the signal, `$2` the group id.
const KILL_GROUP: &str = r#"kill -s "$1" -- "-$2""#;

static ATTEMPTS: AtomicU64 = AtomicU64::new(1);

/// One attempt the executor is responsible for.
struct Entry {
    /// Tells this attempt apart from a later one of the same job id.
    attempt: u64,
    /// The process id of the wrapper, which is also the process group id.
    pid: u32,
    /// The process's start time (`/proc/<pid>/stat` field 22), to notice a reused pid.
    start_time: Option<u64>,
    launch: Arc<Launch>,
    /// A stop is in progress: it, not the waiter, reports the terminal event.
    stopping: bool,
    /// Set by the waiter when the process ended while a stop was in progress.
    exited: Option<Option<i32>>,
}

type Table = Arc<Mutex<HashMap<String, Entry>>>;

fn lock(table: &Table) -> MutexGuard<'_, HashMap<String, Entry>> {
    table
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs jobs as local processes, one folder per job under `root`.
pub struct LocalExecutor {
    root: PathBuf,
    events: Events,
    jobs: Table,
    /// The user jobs run as; `None`: as this process's own (unprivileged) user.
    user: Option<JobUser>,
}

impl LocalExecutor {
    /// Jobs run as this process's user (tests of the executor itself).
    pub fn new(root: PathBuf, events: Events) -> LocalExecutor {
        LocalExecutor::with_user(root, events, None)
    }

    /// Jobs run as `user` (see [`sandbox`]); `None` when the server already runs as it.
    pub fn with_user(root: PathBuf, events: Events, user: Option<JobUser>) -> LocalExecutor {
        if let Err(e) = sandbox::prepare_root(&root) {
            tracing::warn!(error = %e, root = %root.display(), "local executor: cannot prepare the jobs folder");
        }
        LocalExecutor {
            root,
            events,
            jobs: Arc::new(Mutex::new(HashMap::new())),
            user,
        }
    }

    /// The folder of a job: `root/<job id>`, with any character that is not a letter, a digit,
    /// `.`, `_` or `-` percent-encoded (so an id can never leave `root`, and an encoded name
    /// never equals a plain one).
    pub fn job_dir(&self, job_id: &str) -> PathBuf {
        self.root.join(dir_name(job_id))
    }

    /// The job's combined stdout and stderr (and its abort callbacks' output).
    pub fn output_path(&self, job_id: &str) -> PathBuf {
        self.job_dir(job_id).join(OUTPUT_FILE)
    }

    /// How many attempts the executor is watching right now.
    pub fn running(&self) -> usize {
        lock(&self.jobs).len()
    }

    fn send(&self, event: ExecEvent) {
        let _ = self.events.send(event);
    }

    /// Forgets an earlier attempt still in the table under the same id (the driver has moved on
    /// from it) and kills what is left of its process group, so that two copies never run.
    fn supersede(&self, job_id: &str, keep_pid: Option<u32>) {
        let old = lock(&self.jobs).remove(job_id);
        if let Some(old) = old {
            if Some(old.pid) != keep_pid && proc_matches(old.pid, old.start_time) {
                let pid = old.pid;
                tokio::spawn(async move {
                    signal_group(pid, "KILL").await;
                });
            }
        }
    }

    fn spawn_job(&self, job: &Launch, dir: &Path) -> Result<tokio::process::Child, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create job folder {}: {e}", dir.display()))?;
        sandbox::hand_over(dir, self.user)
            .map_err(|e| format!("cannot give the job folder to the job user: {e}"))?;
        match std::fs::remove_file(dir.join(EXIT_CODE_FILE)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove the previous exit code: {e}")),
        }
        let env = job_env(job, dir, self.user)?;
        let (stdout, stderr) = log_files(&dir.join(OUTPUT_FILE))
            .map_err(|e| format!("cannot open {OUTPUT_FILE}: {e}"))?;
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(WRAPPER)
            .arg("switchyard-job")
            .arg(&job.command);
        prepare(&mut cmd, dir, &env, self.user);
        cmd.stdout(stdout).stderr(stderr);
        cmd.spawn().map_err(|e| format!("cannot start bash: {e}"))
    }
}

#[async_trait::async_trait]
impl Executor for LocalExecutor {
    async fn launch(&self, job: Launch) {
        let job_id = job.job_id.clone();
        self.supersede(&job_id, None);
        let dir = self.job_dir(&job_id);
        let mut child = match self.spawn_job(&job, &dir) {
            Ok(child) => child,
            Err(reason) => {
                self.send(ExecEvent::Lost { job_id, reason });
                return;
            }
        };
        let Some(pid) = child.id() else {
            // Only possible when the process was already reaped, which it cannot have been.
            self.send(ExecEvent::Lost {
                job_id,
                reason: "the process has no id".into(),
            });
            return;
        };
        let attempt = ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        lock(&self.jobs).insert(
            job_id.clone(),
            Entry {
                attempt,
                pid,
                start_time: proc_stat(pid).map(|s| s.start_time),
                launch: Arc::new(job),
                stopping: false,
                exited: None,
            },
        );
        self.send(ExecEvent::Running {
            job_id: job_id.clone(),
            handle: pid.to_string(),
        });
        let jobs = self.jobs.clone();
        let events = self.events.clone();
        tokio::spawn(async move {
            let ended = child.wait().await;
            let code = match &ended {
                Ok(status) => exit_code(*status).or_else(|| read_exit_code(&dir)),
                Err(_) => None,
            };
            let mut table = lock(&jobs);
            let Some(entry) = table.get_mut(&job_id) else {
                return;
            };
            if entry.attempt != attempt {
                return;
            }
            if entry.stopping {
                entry.exited = Some(code);
                return;
            }
            table.remove(&job_id);
            let event = match (ended, code) {
                (_, Some(code)) => ExecEvent::Exited { job_id, code },
                (Err(e), None) => ExecEvent::Lost {
                    job_id,
                    reason: format!("cannot wait for the process: {e}"),
                },
                (Ok(_), None) => ExecEvent::Lost {
                    job_id,
                    reason: "process ended without an exit code".into(),
                },
            };
            let _ = events.send(event);
        });
    }

    async fn stop(&self, job_id: &str, reason: StopReason, grace_ms: i64) {
        let target = {
            let mut table = lock(&self.jobs);
            match table.get_mut(job_id) {
                None => None,
                // A stop is already under way; it reports the one terminal event.
                Some(entry) if entry.stopping => return,
                Some(entry) => {
                    entry.stopping = true;
                    Some((entry.attempt, entry.pid, entry.launch.clone()))
                }
            }
        };
        let Some((attempt, pid, launch)) = target else {
            self.send(ExecEvent::Stopped {
                job_id: job_id.to_string(),
                checkpointed: false,
                detail: "not running".into(),
            });
            return;
        };
        let dir = self.job_dir(job_id);
        let jobs = self.jobs.clone();
        let events = self.events.clone();
        let job_id = job_id.to_string();
        let user = self.user;
        tokio::spawn(async move {
            let (checkpointed, callback) =
                run_abort_callback(&launch, &dir, pid, reason, user).await;
            let terminated = terminate(pid, grace_ms).await;
            let mut table = lock(&jobs);
            let mut exited = None;
            if table.get(&job_id).is_some_and(|e| e.attempt == attempt) {
                exited = table.remove(&job_id).and_then(|e| e.exited);
            }
            let terminated = match (terminated, exited) {
                (Terminated::AlreadyGone, Some(Some(code))) => {
                    format!("the job exited on its own with code {code} during the stop")
                }
                (Terminated::AlreadyGone, _) => "the job had already exited".to_string(),
                (t, _) => t.describe(grace_ms),
            };
            let why = match reason {
                StopReason::Preempt => "preempted",
                StopReason::Abort => "aborted",
                StopReason::MaxRuntime => "max runtime reached",
            };
            let _ = events.send(ExecEvent::Stopped {
                job_id,
                checkpointed,
                detail: format!("{why}: {callback}; {terminated}"),
            });
        });
    }

    async fn adopt(&self, job: Adopt) {
        let launch = job.launch;
        let job_id = launch.job_id.clone();
        let dir = self.job_dir(&job_id);
        let Some(handle) = job.handle else {
            self.supersede(&job_id, None);
            self.send(ExecEvent::Lost {
                job_id,
                reason: "never started".into(),
            });
            return;
        };
        let pid = match handle.trim().parse::<u32>() {
            Ok(pid) if pid > 1 => pid,
            _ => {
                self.supersede(&job_id, None);
                self.send(ExecEvent::Lost {
                    job_id,
                    reason: format!("invalid process handle {handle:?}"),
                });
                return;
            }
        };
        {
            // Adopting what is already watched (a repeated adopt) changes nothing.
            let table = lock(&self.jobs);
            if table.get(&job_id).is_some_and(|e| e.pid == pid) {
                return;
            }
        }
        self.supersede(&job_id, Some(pid));
        let start_time = if is_our_process(pid, &dir).await {
            Some(proc_stat(pid).map(|s| s.start_time))
        } else {
            None
        };
        let Some(start_time) = start_time else {
            let event = match read_exit_code(&dir) {
                Some(code) => ExecEvent::Exited { job_id, code },
                None => ExecEvent::Lost {
                    job_id,
                    reason: "process ended without an exit code".into(),
                },
            };
            self.send(event);
            return;
        };
        let attempt = ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        lock(&self.jobs).insert(
            job_id.clone(),
            Entry {
                attempt,
                pid,
                start_time,
                launch: Arc::new(launch),
                stopping: false,
                exited: None,
            },
        );
        let jobs = self.jobs.clone();
        let events = self.events.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(ADOPT_POLL).await;
                if lock(&jobs)
                    .get(&job_id)
                    .is_none_or(|e| e.attempt != attempt)
                {
                    return;
                }
                if pid_alive(pid, start_time).await {
                    continue;
                }
                let code = read_exit_code(&dir);
                let mut table = lock(&jobs);
                let Some(entry) = table.get_mut(&job_id) else {
                    return;
                };
                if entry.attempt != attempt {
                    return;
                }
                if entry.stopping {
                    entry.exited = Some(code);
                    return;
                }
                table.remove(&job_id);
                let event = match code {
                    Some(code) => ExecEvent::Exited { job_id, code },
                    None => ExecEvent::Lost {
                        job_id,
                        reason: "process ended without an exit code".into(),
                    },
                };
                let _ = events.send(event);
                return;
            }
        });
    }
}

/// The folder name for a job id (see [`LocalExecutor::job_dir`]).
fn dir_name(job_id: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-';
    if !job_id.is_empty() && job_id != "." && job_id != ".." && job_id.chars().all(plain) {
        return job_id.to_string();
    }
    let mut name = String::from("%");
    for b in job_id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            name.push(char::from(b));
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    name
}

/// The variables a job (and its abort callback) gets: nothing of the control plane's
/// environment, only [`sandbox::base_env`] and the job's own. Creates the checkpoint folder
/// inside the job folder (a path that would leave it is refused), owned by the job user.
fn job_env(
    job: &Launch,
    dir: &Path,
    user: Option<JobUser>,
) -> Result<Vec<(OsString, OsString)>, String> {
    let mut env = sandbox::base_env(dir);
    env.extend(
        job.env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env.push(("SWITCHYARD_JOB_ID".into(), job.job_id.clone().into()));
    env.push((
        "SWITCHYARD_RESUME_COUNT".into(),
        job.resume_count.to_string().into(),
    ));
    if let Some(ckpt) = &job.checkpoint_dir {
        if !sandbox::checkpoint_path_ok(ckpt) {
            return Err(format!(
                "checkpoint folder {ckpt:?} refused: it must be a relative path inside the job's folder"
            ));
        }
        let mut path = dir.to_path_buf();
        for part in Path::new(ckpt).components() {
            path.push(part);
            if !path.is_dir() {
                std::fs::create_dir(&path)
                    .map_err(|e| format!("cannot create checkpoint folder: {e}"))?;
                sandbox::hand_over(&path, user).map_err(|e| {
                    format!("cannot give the checkpoint folder to the job user: {e}")
                })?;
            }
        }
        env.push(("SWITCHYARD_CHECKPOINT_DIR".into(), path.into_os_string()));
    }
    let mut devices: Vec<u32> = Vec::new();
    for (index, _) in &job.devices {
        if !devices.contains(index) {
            devices.push(*index);
        }
    }
    let devices: Vec<String> = devices.iter().map(u32::to_string).collect();
    env.push(("CUDA_VISIBLE_DEVICES".into(), devices.join(",").into()));
    Ok(env)
}

/// Common settings of a job's and a callback's process: own group, folder, a clean
/// environment, no input, and the job user (supplementary groups are dropped with it).
fn prepare(cmd: &mut Command, dir: &Path, env: &[(OsString, OsString)], user: Option<JobUser>) {
    cmd.env_clear();
    for (key, value) in env {
        cmd.env(key, value);
    }
    if let Some(u) = user {
        cmd.uid(u.uid).gid(u.gid);
    }
    cmd.current_dir(dir).stdin(Stdio::null()).process_group(0);
}

fn log_files(path: &Path) -> std::io::Result<(File, File)> {
    let out = OpenOptions::new().create(true).append(true).open(path)?;
    let err = out.try_clone()?;
    Ok((out, err))
}

/// An exit code as the shell reports it: 128 + the signal for a process killed by one.
fn exit_code(status: ExitStatus) -> Option<i32> {
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
}

fn read_exit_code(dir: &Path) -> Option<i32> {
    std::fs::read_to_string(dir.join(EXIT_CODE_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Runs the abort callback if the job has one. Returns (checkpointed, what happened).
async fn run_abort_callback(
    launch: &Launch,
    dir: &Path,
    pid: u32,
    reason: StopReason,
    user: Option<JobUser>,
) -> (bool, String) {
    let Some(callback) = &launch.abort else {
        return (false, "no abort callback".into());
    };
    let timeout_ms = callback.timeout_ms.max(0);
    let mut env = match job_env(launch, dir, user) {
        Ok(env) => env,
        Err(e) => return (false, format!("abort callback not run: {e}")),
    };
    let reason = match reason {
        StopReason::Preempt => "preempt",
        StopReason::Abort => "abort",
        StopReason::MaxRuntime => "max_runtime",
    };
    env.push(("SWITCHYARD_STOP_REASON".into(), reason.into()));
    env.push(("SWITCHYARD_JOB_PID".into(), pid.to_string().into()));
    let mut cmd = match callback.kind {
        AbortKind::Bash => Command::new("bash"),
        AbortKind::Python => Command::new("python3"),
    };
    cmd.arg("-c").arg(&callback.command);
    prepare(&mut cmd, dir, &env, user);
    match log_files(&dir.join(OUTPUT_FILE)) {
        Ok((out, err)) => cmd.stdout(out).stderr(err),
        Err(_) => cmd.stdout(Stdio::null()).stderr(Stdio::null()),
    };
    cmd.kill_on_drop(true);
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return (false, format!("abort callback could not start: {e}")),
    };
    let group = child.id();
    let limit = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
    let waited = tokio::time::timeout(limit, child.wait()).await;
    // Whatever the callback left behind in its group goes with it.
    if let Some(group) = group {
        signal_group(group, "KILL").await;
    }
    match waited {
        Ok(Ok(status)) => {
            let took = started.elapsed().as_millis();
            if status.success() {
                (true, format!("abort callback finished in {took} ms"))
            } else {
                let how = match exit_code(status) {
                    Some(code) => format!("exit code {code}"),
                    None => "no exit code".to_string(),
                };
                (
                    false,
                    format!("abort callback failed ({how}) after {took} ms"),
                )
            }
        }
        Ok(Err(e)) => (false, format!("abort callback could not be waited on: {e}")),
        Err(_) => {
            let _ = child.kill().await;
            (
                false,
                format!("abort callback timed out after {timeout_ms} ms"),
            )
        }
    }
}

/// How a process group ended when told to.
#[derive(Debug, PartialEq, Eq)]
enum Terminated {
    /// No member was left before any signal was sent.
    AlreadyGone,
    /// Every member was gone within the grace period after SIGTERM.
    Term,
    /// SIGKILL was needed; `lingering`: some member still existed `KILL_WAIT` after it.
    Kill { lingering: bool },
}

impl Terminated {
    fn describe(&self, grace_ms: i64) -> String {
        match self {
            Terminated::AlreadyGone => "the job had already exited".into(),
            Terminated::Term => "terminated with SIGTERM".into(),
            Terminated::Kill { lingering: false } => {
                format!("killed with SIGKILL after {} ms grace", grace_ms.max(0))
            }
            Terminated::Kill { lingering: true } => format!(
                "killed with SIGKILL after {} ms grace, but some processes had not exited {} s later",
                grace_ms.max(0),
                KILL_WAIT.as_secs()
            ),
        }
    }
}

/// SIGTERM to the group, up to `grace_ms` for every member to go, then SIGKILL.
async fn terminate(pgid: u32, grace_ms: i64) -> Terminated {
    if !group_alive(pgid).await {
        return Terminated::AlreadyGone;
    }
    signal_group(pgid, "TERM").await;
    let grace = Duration::from_millis(u64::try_from(grace_ms).unwrap_or(0));
    if wait_group_gone(pgid, grace).await {
        return Terminated::Term;
    }
    signal_group(pgid, "KILL").await;
    let lingering = !wait_group_gone(pgid, KILL_WAIT).await;
    Terminated::Kill { lingering }
}

/// Waits up to `limit` for the group to have no live member; true when it has none.
async fn wait_group_gone(pgid: u32, limit: Duration) -> bool {
    // No deadline (a grace period too long to represent): wait as long as it takes.
    let deadline = Instant::now().checked_add(limit);
    loop {
        if !group_alive(pgid).await {
            return true;
        }
        let pause = match deadline {
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return false;
                }
                GROUP_POLL.min(deadline - now)
            }
            None => GROUP_POLL,
        };
        tokio::time::sleep(pause).await;
    }
}

/// Sends a signal (`TERM`, `KILL`, `0`) to a whole process group; true when bash's `kill`
/// succeeded (for `0`: some member exists).
async fn signal_group(pgid: u32, signal: &str) -> bool {
    if pgid <= 1 {
        return false;
    }
    Command::new("bash")
        .arg("-c")
        .arg(KILL_GROUP)
        .arg("switchyard-kill")
        .arg(signal)
        .arg(pgid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|status| status.success())
}

/// What `/proc/<pid>/stat` says about a process.
struct ProcStat {
    state: char,
    pgrp: u32,
    start_time: u64,
}

fn parse_stat(stat: &str) -> Option<ProcStat> {
    // The command name (field 2) is in parentheses and may hold anything, spaces included.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (3), ppid (4), pgrp (5), ..., starttime (22).
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

fn proc_stat(pid: u32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn have_procfs() -> bool {
    Path::new("/proc/self/stat").exists()
}

/// A zombie (or a dead task) no longer runs anything.
fn running_state(state: char) -> bool {
    state != 'Z' && state != 'X' && state != 'x'
}

/// True when the process still exists, runs, and (where recorded) is the same process.
fn proc_matches(pid: u32, start_time: Option<u64>) -> bool {
    match proc_stat(pid) {
        Some(stat) => running_state(stat.state) && start_time.is_none_or(|t| t == stat.start_time),
        None => !have_procfs(),
    }
}

async fn pid_alive(pid: u32, start_time: Option<u64>) -> bool {
    if have_procfs() {
        return proc_matches(pid, start_time);
    }
    Command::new("kill")
        .arg("-0")
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|status| status.success())
}

/// True when some running (not zombie) process is in the group.
async fn group_alive(pgid: u32) -> bool {
    if let Ok(entries) = std::fs::read_dir("/proc") {
        if have_procfs() {
            return entries.flatten().any(|entry| {
                entry
                    .file_name()
                    .to_str()
                    .and_then(|name| name.parse::<u32>().ok())
                    .and_then(proc_stat)
                    .is_some_and(|stat| stat.pgrp == pgid && running_state(stat.state))
            });
        }
    }
    signal_group(pgid, "0").await
}

/// Whether `pid` is the wrapper of the job in `dir` (and not a process that reused its pid):
/// alive, leader of its own group, working in the job's folder. Where `/proc` cannot tell,
/// being alive is enough.
async fn is_our_process(pid: u32, dir: &Path) -> bool {
    if !have_procfs() {
        return pid_alive(pid, None).await;
    }
    let Some(stat) = proc_stat(pid) else {
        return false;
    };
    if !running_state(stat.state) || stat.pgrp != pid {
        return false;
    }
    match std::fs::read_link(format!("/proc/{pid}/cwd")) {
        Ok(cwd) => match std::fs::canonicalize(dir) {
            Ok(dir) => cwd == dir,
            Err(_) => false,
        },
        // Another user's process: not ours to watch (ours would be readable).
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::AbortCallback;
    use super::*;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    static DIRS: AtomicU64 = AtomicU64::new(0);

    /// A fresh folder under the system's temporary folder, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let n = DIRS.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!(
                "switchyard-local-{}-{name}-{n}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn setup(name: &str) -> (TempDir, LocalExecutor, UnboundedReceiver<ExecEvent>) {
        let dir = TempDir::new(name);
        let (tx, rx) = unbounded_channel();
        let ex = LocalExecutor::new(dir.0.clone(), tx);
        (dir, ex, rx)
    }

    fn job(id: &str, command: &str) -> Launch {
        Launch {
            job_id: id.into(),
            resume_count: 0,
            command: command.into(),
            image: None,
            env: vec![],
            checkpoint_dir: None,
            abort: None,
            node: "local".into(),
            devices: vec![],
            duration_ms: None,
        }
    }

    fn callback(kind: AbortKind, command: &str, timeout_ms: i64) -> Option<AbortCallback> {
        Some(AbortCallback {
            kind,
            command: command.into(),
            timeout_ms,
        })
    }

    async fn next(rx: &mut UnboundedReceiver<ExecEvent>) -> ExecEvent {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("no event within 10 s")
            .expect("channel closed")
    }

    async fn quiet(rx: &mut UnboundedReceiver<ExecEvent>, ms: u64) {
        if let Ok(event) = tokio::time::timeout(Duration::from_millis(ms), rx.recv()).await {
            panic!("unexpected event {event:?}");
        }
    }

    async fn running_pid(rx: &mut UnboundedReceiver<ExecEvent>, id: &str) -> u32 {
        match next(rx).await {
            ExecEvent::Running { job_id, handle } => {
                assert_eq!(job_id, id);
                handle.parse().unwrap()
            }
            other => panic!("expected Running, got {other:?}"),
        }
    }

    fn stopped(event: ExecEvent, id: &str) -> (bool, String) {
        match event {
            ExecEvent::Stopped {
                job_id,
                checkpointed,
                detail,
            } => {
                assert_eq!(job_id, id);
                (checkpointed, detail)
            }
            other => panic!("expected Stopped, got {other:?}"),
        }
    }

    /// Waits for a file the job writes (a pid) and reads it.
    async fn read_pid(path: &Path) -> u32 {
        for _ in 0..200 {
            if let Ok(text) = std::fs::read_to_string(path) {
                if let Ok(pid) = text.trim().parse() {
                    return pid;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{} never appeared", path.display());
    }

    /// Dead, as `kill(pid, 0)` would say, except that a zombie waiting for a (possibly
    /// non-reaping) init to collect it counts as dead too.
    fn dead(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => !running_state(parse_stat(&stat).unwrap().state),
        }
    }

    #[tokio::test]
    async fn exit_code_output_and_environment() {
        let (_dir, ex, mut rx) = setup("exit");
        let mut launch = job(
            "job-1",
            r#"echo hello; echo "it's \"quoted\" $((1+1))"; echo "id=$SWITCHYARD_JOB_ID resume=$SWITCHYARD_RESUME_COUNT cuda=[$CUDA_VISIBLE_DEVICES] foo=$FOO"; echo oops >&2; exit 3"#,
        );
        launch.resume_count = 2;
        launch.env = vec![("FOO".into(), "bar baz".into())];
        launch.devices = vec![(0, 1000), (2, 500)];
        ex.launch(launch).await;
        running_pid(&mut rx, "job-1").await;
        assert_eq!(
            next(&mut rx).await,
            ExecEvent::Exited {
                job_id: "job-1".into(),
                code: 3
            }
        );
        let folder = ex.job_dir("job-1");
        assert_eq!(
            std::fs::read_to_string(folder.join("exit_code")).unwrap(),
            "3\n"
        );
        let log = std::fs::read_to_string(ex.output_path("job-1")).unwrap();
        assert!(log.contains("hello\n"), "{log}");
        assert!(log.contains("it's \"quoted\" 2\n"), "{log}");
        assert!(
            log.contains("id=job-1 resume=2 cuda=[0,2] foo=bar baz\n"),
            "{log}"
        );
        assert!(log.contains("oops\n"), "{log}");
        assert_eq!(ex.running(), 0);

        // No devices: CUDA_VISIBLE_DEVICES is set, empty. A relaunch clears the old exit code.
        ex.launch(job(
            "job-1",
            r#"echo "set=${CUDA_VISIBLE_DEVICES+yes} value=[$CUDA_VISIBLE_DEVICES]"; test -e exit_code && echo stale; exit 0"#,
        ))
        .await;
        running_pid(&mut rx, "job-1").await;
        assert_eq!(
            next(&mut rx).await,
            ExecEvent::Exited {
                job_id: "job-1".into(),
                code: 0
            }
        );
        let log = std::fs::read_to_string(ex.output_path("job-1")).unwrap();
        assert!(log.contains("set=yes value=[]\n"), "{log}");
        assert!(!log.contains("stale"), "{log}");
        // A job killed by a signal reports 128 + the signal.
        ex.launch(job("job-1", "kill -9 $$")).await;
        running_pid(&mut rx, "job-1").await;
        assert_eq!(
            next(&mut rx).await,
            ExecEvent::Exited {
                job_id: "job-1".into(),
                code: 137
            }
        );
        quiet(&mut rx, 100).await;
    }

    #[tokio::test]
    async fn failure_to_start_is_lost() {
        let dir = TempDir::new("lost");
        let root = dir.0.join("a-file");
        std::fs::write(&root, "not a folder").unwrap();
        let (tx, mut rx) = unbounded_channel();
        let ex = LocalExecutor::new(root, tx);
        ex.launch(job("j", "true")).await;
        match next(&mut rx).await {
            ExecEvent::Lost { job_id, reason } => {
                assert_eq!(job_id, "j");
                assert!(reason.contains("cannot create job folder"), "{reason}");
            }
            other => panic!("expected Lost, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn abort_callback_checkpoints_then_sigterm() {
        let (_dir, ex, mut rx) = setup("ckpt");
        let mut launch = job("j", "echo started; sleep 1000 & echo $! > child.pid; wait");
        launch.checkpoint_dir = Some("ckpt".into());
        launch.abort = callback(
            AbortKind::Bash,
            r#"echo "$SWITCHYARD_STOP_REASON $SWITCHYARD_JOB_ID" > "$SWITCHYARD_CHECKPOINT_DIR/state.txt""#,
            5000,
        );
        ex.launch(launch).await;
        let pid = running_pid(&mut rx, "j").await;
        let child = read_pid(&ex.job_dir("j").join("child.pid")).await;
        ex.stop("j", StopReason::Preempt, 2000).await;
        let (checkpointed, detail) = stopped(next(&mut rx).await, "j");
        assert!(checkpointed, "{detail}");
        assert!(detail.contains("abort callback finished in"), "{detail}");
        assert!(detail.contains("terminated with SIGTERM"), "{detail}");
        let state = std::fs::read_to_string(ex.job_dir("j").join("ckpt/state.txt")).unwrap();
        assert_eq!(state, "preempt j\n");
        assert!(!group_alive(pid).await);
        assert!(dead(pid) && dead(child));
        assert_eq!(ex.running(), 0);
        quiet(&mut rx, 300).await;
    }

    #[tokio::test]
    async fn sigterm_ignored_means_sigkill_for_the_whole_group() {
        let (_dir, ex, mut rx) = setup("kill");
        ex.launch(job(
            "j",
            "trap '' TERM; sleep 1000 & echo $! > child.pid; wait",
        ))
        .await;
        let pid = running_pid(&mut rx, "j").await;
        let child = read_pid(&ex.job_dir("j").join("child.pid")).await;
        let started = Instant::now();
        ex.stop("j", StopReason::Abort, 300).await;
        let (checkpointed, detail) = stopped(next(&mut rx).await, "j");
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(!checkpointed);
        assert_eq!(
            detail,
            "aborted: no abort callback; killed with SIGKILL after 300 ms grace"
        );
        assert!(!group_alive(pid).await);
        assert!(dead(pid), "job {pid} survived");
        assert!(dead(child), "grandchild {child} survived");
        quiet(&mut rx, 300).await;
    }

    #[tokio::test]
    async fn callback_past_its_timeout_is_killed() {
        let (_dir, ex, mut rx) = setup("timeout");
        let mut launch = job("j", "sleep 1000");
        launch.abort = callback(
            AbortKind::Bash,
            "sleep 30 & echo $! > cb.pid; wait; touch late",
            300,
        );
        ex.launch(launch).await;
        let pid = running_pid(&mut rx, "j").await;
        let started = Instant::now();
        ex.stop("j", StopReason::MaxRuntime, 1000).await;
        let (checkpointed, detail) = stopped(next(&mut rx).await, "j");
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(!checkpointed);
        assert!(
            detail.starts_with("max runtime reached: abort callback timed out after 300 ms; "),
            "{detail}"
        );
        assert!(detail.ends_with("terminated with SIGTERM"), "{detail}");
        let cb = read_pid(&ex.job_dir("j").join("cb.pid")).await;
        assert!(dead(cb), "callback child {cb} survived");
        assert!(dead(pid));
        assert!(!ex.job_dir("j").join("late").exists());
    }

    #[tokio::test]
    async fn python_callback() {
        let (_dir, ex, mut rx) = setup("python");
        let mut launch = job("j", "sleep 1000");
        launch.checkpoint_dir = Some("ckpt".into());
        launch.abort = callback(
            AbortKind::Python,
            "import os\nwith open(os.path.join(os.environ['SWITCHYARD_CHECKPOINT_DIR'], 'py.txt'), 'w') as f:\n    f.write(os.environ['SWITCHYARD_STOP_REASON'] + ' ' + os.environ['SWITCHYARD_JOB_PID'])\n",
            5000,
        );
        ex.launch(launch).await;
        let pid = running_pid(&mut rx, "j").await;
        // (A grace period too long to represent as a deadline is no problem either.)
        ex.stop("j", StopReason::Abort, i64::MAX).await;
        let (checkpointed, detail) = stopped(next(&mut rx).await, "j");
        assert!(checkpointed, "{detail}");
        assert!(detail.ends_with("terminated with SIGTERM"), "{detail}");
        let written = std::fs::read_to_string(ex.job_dir("j").join("ckpt/py.txt")).unwrap();
        assert_eq!(written, format!("abort {pid}"));

        // A callback that fails does not count as a checkpoint.
        let mut launch = job("k", "sleep 1000");
        launch.abort = callback(AbortKind::Python, "raise SystemExit(2)", 5000);
        ex.launch(launch).await;
        running_pid(&mut rx, "k").await;
        ex.stop("k", StopReason::Abort, 1000).await;
        let (checkpointed, detail) = stopped(next(&mut rx).await, "k");
        assert!(!checkpointed);
        assert!(
            detail.contains("abort callback failed (exit code 2)"),
            "{detail}"
        );
    }

    #[tokio::test]
    async fn adopt_after_restart() {
        let dir = TempDir::new("adopt");
        let (tx1, mut rx1) = unbounded_channel();
        let first = LocalExecutor::new(dir.0.clone(), tx1);
        let finishing = job("finishing", "sleep 0.6; exit 7");
        let long = {
            let mut long = job("long", "sleep 1000 & echo $! > child.pid; wait");
            long.checkpoint_dir = Some("ckpt".into());
            long.abort = callback(
                AbortKind::Bash,
                r#"echo "$SWITCHYARD_STOP_REASON" > "$SWITCHYARD_CHECKPOINT_DIR/saved""#,
                5000,
            );
            long
        };
        first.launch(finishing.clone()).await;
        let pid = running_pid(&mut rx1, "finishing").await;
        first.launch(long.clone()).await;
        let long_pid = running_pid(&mut rx1, "long").await;
        let long_child = read_pid(&first.job_dir("long").join("child.pid")).await;
        // "Restart": a second executor on the same folder takes over.
        let (tx2, mut rx2) = unbounded_channel();
        let second = LocalExecutor::new(dir.0.clone(), tx2);
        second
            .adopt(Adopt {
                launch: finishing,
                handle: Some(pid.to_string()),
                started_at: 0,
            })
            .await;
        second
            .adopt(Adopt {
                launch: long,
                handle: Some(long_pid.to_string()),
                started_at: 0,
            })
            .await;
        assert_eq!(second.running(), 2);
        assert_eq!(
            next(&mut rx2).await,
            ExecEvent::Exited {
                job_id: "finishing".into(),
                code: 7
            }
        );
        // Stopping an adopted job signals its group.
        second.stop("long", StopReason::Preempt, 2000).await;
        let (checkpointed, detail) = stopped(next(&mut rx2).await, "long");
        assert!(checkpointed, "{detail}");
        assert!(detail.contains("terminated with SIGTERM"), "{detail}");
        assert_eq!(
            std::fs::read_to_string(second.job_dir("long").join("ckpt/saved")).unwrap(),
            "preempt\n"
        );
        assert!(dead(long_pid) && dead(long_child));
        assert_eq!(second.running(), 0);
        quiet(&mut rx2, 400).await;
        // (The first executor still reaped its children and reported to nobody who listens.)
        drop(rx1);

        // Gone, with an exit code left behind.
        let gone = "4194399"; // above any pid_max
        std::fs::create_dir_all(second.job_dir("done")).unwrap();
        std::fs::write(second.job_dir("done").join("exit_code"), "5\n").unwrap();
        second
            .adopt(Adopt {
                launch: job("done", "true"),
                handle: Some(gone.into()),
                started_at: 0,
            })
            .await;
        assert_eq!(
            next(&mut rx2).await,
            ExecEvent::Exited {
                job_id: "done".into(),
                code: 5
            }
        );
        // Gone without one.
        second
            .adopt(Adopt {
                launch: job("vanished", "true"),
                handle: Some(gone.into()),
                started_at: 0,
            })
            .await;
        assert_eq!(
            next(&mut rx2).await,
            ExecEvent::Lost {
                job_id: "vanished".into(),
                reason: "process ended without an exit code".into()
            }
        );
        // A live pid that is not the job's (reused pid): not adopted, never signalled.
        second
            .adopt(Adopt {
                launch: job("reused", "true"),
                handle: Some(std::process::id().to_string()),
                started_at: 0,
            })
            .await;
        assert!(matches!(
            next(&mut rx2).await,
            ExecEvent::Lost { job_id, .. } if job_id == "reused"
        ));
        // Never started.
        second
            .adopt(Adopt {
                launch: job("never", "true"),
                handle: None,
                started_at: 0,
            })
            .await;
        assert_eq!(
            next(&mut rx2).await,
            ExecEvent::Lost {
                job_id: "never".into(),
                reason: "never started".into()
            }
        );
        assert_eq!(second.running(), 0);
    }

    #[tokio::test]
    async fn stop_of_an_unknown_or_finished_job() {
        let (_dir, ex, mut rx) = setup("unknown");
        ex.stop("nope", StopReason::Abort, 1000).await;
        assert_eq!(
            next(&mut rx).await,
            ExecEvent::Stopped {
                job_id: "nope".into(),
                checkpointed: false,
                detail: "not running".into()
            }
        );
        ex.launch(job("quick", "exit 0")).await;
        running_pid(&mut rx, "quick").await;
        assert!(matches!(
            next(&mut rx).await,
            ExecEvent::Exited { code: 0, .. }
        ));
        ex.stop("quick", StopReason::Abort, 1000).await;
        let (checkpointed, detail) = stopped(next(&mut rx).await, "quick");
        assert!(!checkpointed);
        assert_eq!(detail, "not running");
    }

    #[tokio::test]
    async fn exit_during_a_stop_reports_only_stopped() {
        let (_dir, ex, mut rx) = setup("race");
        let mut launch = job("j", "sleep 0.3; exit 4");
        launch.abort = callback(AbortKind::Bash, "sleep 0.8", 5000);
        ex.launch(launch).await;
        running_pid(&mut rx, "j").await;
        ex.stop("j", StopReason::Preempt, 1000).await;
        // A second stop while the first runs adds nothing.
        ex.stop("j", StopReason::Abort, 0).await;
        let (checkpointed, detail) = stopped(next(&mut rx).await, "j");
        assert!(checkpointed, "{detail}");
        assert!(
            detail.ends_with("the job exited on its own with code 4 during the stop"),
            "{detail}"
        );
        quiet(&mut rx, 400).await;
    }

    #[test]
    fn folder_names_stay_inside_the_root() {
        assert_eq!(dir_name("0190a1b2-c3d4.x_y"), "0190a1b2-c3d4.x_y");
        assert_eq!(dir_name(".."), "%%2E%2E");
        assert_eq!(dir_name("."), "%%2E");
        assert_eq!(dir_name(""), "%");
        assert_eq!(dir_name("../etc/passwd"), "%%2E%2E%2Fetc%2Fpasswd");
        assert_eq!(dir_name("a b"), "%a%20b");
    }

    #[test]
    fn stat_parsing() {
        let stat =
            "1234 (we ird) name)) S 1 1234 1234 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
        let parsed = parse_stat(stat).unwrap();
        assert_eq!(parsed.state, 'S');
        assert_eq!(parsed.pgrp, 1234);
        assert_eq!(parsed.start_time, 98765);
        assert!(parse_stat("garbage").is_none());
    }
}
