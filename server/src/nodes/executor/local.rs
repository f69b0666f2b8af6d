//! The local executor: each attempt is a real process on this host, started with `bash -c` in
//! its own process group, in its own folder `root/<job id>/`. Its output goes to
//! `root/<job id>/output.log`; a small wrapper writes its process id and attempt to
//! `root/<job id>/wrapper_pid` before the job's command starts, and its exit code to
//! `root/<job id>/exit_code` after, so that a restarted control plane can find a job it never
//! learned the handle of, and learn how a job it adopted ended.
//!
//! A stop runs the job's abort callback (bounded by its timeout), then sends SIGTERM to the
//! whole process group, waits for the grace period and sends SIGKILL to what is left. The
//! callback runs at most once per attempt, even across restarts: before the callback's command
//! starts, its own wrapper claims `root/<job id>/abort_started.<attempt>` (a hard link, which
//! exists whole or not at all); a restarted executor that re-sends the stop finds the claim,
//! waits for the callback already running (or reads how it ended) and does not run it again.
//! Signals go through bash's `kill` builtin, and liveness is read from `/proc` (falling back
//! to `kill -0`), so no unsafe code is needed.
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
/// The name of the file where the wrapper records `<its pid> <attempt>` before the job starts.
const PID_FILE: &str = "wrapper_pid";
/// How often an adopted job (not our child: no wait possible) is checked.
const ADOPT_POLL: Duration = Duration::from_millis(200);
/// How often a stopping process group is checked for members.
const GROUP_POLL: Duration = Duration::from_millis(25);
/// How long to wait for a process group to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Records its pid and the attempt (`$2`) in `wrapper_pid` (written whole, by a rename),
/// then runs the job's command (`$1`) in a child bash and records its exit code. The TERM trap
/// keeps this wrapper (the group leader, whose pid is the handle) alive until the job itself is
/// gone; it is a handler, not an ignore, so the job's own bash starts with the default
/// disposition.
const WRAPPER: &str = r#"trap 'switchyard_term=1' TERM
printf '%s %s\n' "$$" "$2" > wrapper_pid.tmp && mv -f wrapper_pid.tmp wrapper_pid || exit 70
bash -c "$1"
switchyard_code=$?
printf '%s\n' "$switchyard_code" > exit_code
exit "$switchyard_code""#;

/// Signals a process group through bash's `kill` builtin: `$1` the signal, `$2` the group id.
const KILL_GROUP: &str = r#"kill -s "$1" -- "-$2""#;

mod abort;
mod process;

use abort::run_abort_callback;
use process::*;

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
        for (file, what) in [(EXIT_CODE_FILE, "exit code"), (PID_FILE, "process id file")] {
            match std::fs::remove_file(dir.join(file)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot remove the previous {what}: {e}")),
            }
        }
        let env = job_env(job, dir, self.user)?;
        let (stdout, stderr) = log_files(&dir.join(OUTPUT_FILE))
            .map_err(|e| format!("cannot open {OUTPUT_FILE}: {e}"))?;
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(WRAPPER)
            .arg("switchyard-job")
            .arg(&job.command)
            .arg(job.resume_count.to_string());
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
        // An earlier wrapper of this job still running (started by a control plane that died
        // before it learned of it) goes first, so that two copies never run.
        if let Some((pid, _)) = read_wrapper_pid(&dir) {
            if is_our_process(pid, &dir).await {
                signal_group(pid, "KILL").await;
            }
        }
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
            let _ = events.send(ExecEvent::Stopped {
                job_id,
                checkpointed,
                detail: format!("{}: {callback}; {terminated}", why(reason)),
            });
        });
    }

    async fn adopt(&self, job: Adopt) {
        let launch = job.launch;
        let job_id = launch.job_id.clone();
        let dir = self.job_dir(&job_id);
        // (pid, whether the store has yet to learn it as the handle)
        let (pid, announce) = match job.handle {
            Some(handle) => match handle.trim().parse::<u32>() {
                Ok(pid) if pid > 1 => (pid, false),
                _ => {
                    self.supersede(&job_id, None);
                    self.send(ExecEvent::Lost {
                        job_id,
                        reason: format!("invalid process handle {handle:?}"),
                    });
                    return;
                }
            },
            // No handle stored: the control plane died between `starting` and `running`. The
            // wrapper records its pid and attempt before the job's command starts (and one
            // that has not yet is found among the processes), so either this attempt's wrapper
            // is found (and adopted like a stored handle) or the attempt never started (and
            // starts now, unless it is being stopped).
            None => match read_wrapper_pid(&dir)
                .filter(|(pid, attempt)| *attempt == launch.resume_count && *pid > 1)
                .map(|(pid, _)| pid)
                .or_else(|| find_wrapper(&dir, launch.resume_count))
            {
                Some(pid) => (pid, true),
                None => match job.stop {
                    Some(reason) => {
                        self.supersede(&job_id, None);
                        self.send(ExecEvent::Stopped {
                            job_id,
                            checkpointed: false,
                            detail: format!("{}: it had not started", why(reason)),
                        });
                        return;
                    }
                    None => {
                        self.launch(launch).await;
                        return;
                    }
                },
            },
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
        if announce {
            self.send(ExecEvent::Running {
                job_id: job_id.clone(),
                handle: pid.to_string(),
            });
        }
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

/// Why a job stopped, in the words of its `Stopped` detail.
fn why(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Preempt => "preempted",
        StopReason::Abort => "aborted",
        StopReason::MaxRuntime => "max runtime reached",
    }
}

/// `(pid, attempt)` from the wrapper's `wrapper_pid` file, if there is a whole one.
fn read_wrapper_pid(dir: &Path) -> Option<(u32, i64)> {
    let text = std::fs::read_to_string(dir.join(PID_FILE)).ok()?;
    let mut parts = text.split_whitespace();
    let pid = parts.next()?.parse().ok()?;
    let attempt = parts.next()?.parse().ok()?;
    Some((pid, attempt))
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

#[cfg(test)]
mod tests;
