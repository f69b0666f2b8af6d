//! Processes and process groups of the local executor: signals through bash's `kill`
//! builtin, liveness from `/proc` (falling back to `kill -0`), so no unsafe code is needed.

use super::*;

/// How a process group ended when told to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Terminated {
    /// No member was left before any signal was sent.
    AlreadyGone,
    /// Every member was gone within the grace period after SIGTERM.
    Term,
    /// SIGKILL was needed; `lingering`: some member still existed `KILL_WAIT` after it.
    Kill { lingering: bool },
}

impl Terminated {
    pub(super) fn describe(&self, grace_ms: i64) -> String {
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
pub(super) async fn terminate(pgid: u32, grace_ms: i64) -> Terminated {
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
pub(super) async fn wait_group_gone(pgid: u32, limit: Duration) -> bool {
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
pub(super) async fn signal_group(pgid: u32, signal: &str) -> bool {
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
pub(super) struct ProcStat {
    pub(super) state: char,
    pub(super) pgrp: u32,
    pub(super) start_time: u64,
}

pub(super) fn parse_stat(stat: &str) -> Option<ProcStat> {
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

pub(super) fn proc_stat(pid: u32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

pub(super) fn have_procfs() -> bool {
    Path::new("/proc/self/stat").exists()
}

/// A zombie (or a dead task) no longer runs anything.
pub(super) fn running_state(state: char) -> bool {
    state != 'Z' && state != 'X' && state != 'x'
}

/// True when the process still exists, runs, and (where recorded) is the same process.
pub(super) fn proc_matches(pid: u32, start_time: Option<u64>) -> bool {
    match proc_stat(pid) {
        Some(stat) => running_state(stat.state) && start_time.is_none_or(|t| t == stat.start_time),
        None => !have_procfs(),
    }
}

pub(super) async fn pid_alive(pid: u32, start_time: Option<u64>) -> bool {
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
pub(super) async fn group_alive(pgid: u32) -> bool {
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
/// alive, leader of its own group, working in the job's folder, named `switchyard-job`. Where
/// `/proc` cannot tell, being alive is enough.
pub(super) async fn is_our_process(pid: u32, dir: &Path) -> bool {
    is_our_wrapper(pid, dir, "switchyard-job").await
}

/// Whether `pid` is the wrapper of an abort callback of the job in `dir` (`switchyard-abort`).
pub(super) async fn is_our_callback(pid: u32, dir: &Path) -> bool {
    is_our_wrapper(pid, dir, "switchyard-abort").await
}

/// The live wrapper of attempt `attempt` of the job in `dir`, looked for among all processes:
/// for a wrapper that is running but has not written its pid file yet. `None` without `/proc`.
pub(super) fn find_wrapper(dir: &Path, attempt: i64) -> Option<u32> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let attempt = attempt.to_string();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = proc_stat(pid)?;
            if !running_state(stat.state) || stat.pgrp != pid {
                return None;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let ours = args.get(3) == Some(&b"switchyard-job".as_slice())
                && args.get(5) == Some(&attempt.as_bytes());
            (ours && std::fs::read_link(format!("/proc/{pid}/cwd")).ok()? == dir).then_some(pid)
        })
}

/// A wrapper started as `bash -c <script> <name> ...`: its `$0` is `name`.
async fn is_our_wrapper(pid: u32, dir: &Path, name: &str) -> bool {
    if !have_procfs() {
        return pid_alive(pid, None).await;
    }
    let Some(stat) = proc_stat(pid) else {
        return false;
    };
    if !running_state(stat.state) || stat.pgrp != pid {
        return false;
    }
    let named = std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        cmdline
            .split(|b| *b == 0)
            .nth(3)
            .is_some_and(|arg| arg == name.as_bytes())
    });
    if !named {
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
