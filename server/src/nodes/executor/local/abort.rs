//! A stop's abort callback: run at most once per attempt, even across restarts (see the
//! module notes of the local executor).

use super::*;

/// The claim of an attempt's abort callback: `abort_started.<attempt>` holds the pid of the
/// callback's wrapper; `abort_code.<attempt>` the callback's exit code once it ended.
const ABORT_CLAIM: &str = "abort_started";
const ABORT_CODE: &str = "abort_code";
/// The exit code of a callback wrapper that found the callback already claimed.
const ABORT_CLAIMED: i32 = 75;

/// Runs an abort callback (`$2`, with the interpreter `$1`) once per attempt: claims `$3` by
/// hard-linking a file holding this wrapper's pid to it (which fails when it exists), exits
/// 75 when another run holds the claim, records the callback's exit code in `$4` after.
const ABORT_WRAPPER: &str = r#"printf '%s\n' "$$" > "$3.$$" || exit 70
if ! ln "$3.$$" "$3" 2>/dev/null; then rm -f "$3.$$"; exit 75; fi
rm -f "$3.$$"
"$1" -c "$2"
switchyard_code=$?
printf '%s\n' "$switchyard_code" > "$4"
exit "$switchyard_code""#;

/// Runs the abort callback if the job has one, at most once per attempt (see the module
/// notes). Returns (checkpointed, what happened).
pub(super) async fn run_abort_callback(
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
    let limit = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
    let claim = format!("{ABORT_CLAIM}.{}", launch.resume_count);
    let code_file = format!("{ABORT_CODE}.{}", launch.resume_count);
    let mut env = match job_env(launch, dir, user) {
        Ok(env) => env,
        Err(e) => return (false, format!("abort callback not run: {e}")),
    };
    env.push(("SWITCHYARD_STOP_REASON".into(), reason.as_str().into()));
    env.push(("SWITCHYARD_JOB_PID".into(), pid.to_string().into()));
    let interpreter = match callback.kind {
        AbortKind::Bash => "bash",
        AbortKind::Python => "python3",
    };
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(ABORT_WRAPPER)
        .arg("switchyard-abort")
        .arg(interpreter)
        .arg(&callback.command)
        .arg(&claim)
        .arg(&code_file);
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
    let waited = tokio::time::timeout(limit, child.wait()).await;
    // Whatever the callback left behind in its group goes with it.
    if let Some(group) = group {
        signal_group(group, "KILL").await;
    }
    match waited {
        Ok(Ok(status)) => {
            let took = started.elapsed().as_millis();
            let claimed_before = exit_code(status) == Some(ABORT_CLAIMED)
                && group.is_some()
                && read_number(&dir.join(&claim)) != group;
            if claimed_before {
                earlier_callback(dir, &claim, &code_file, limit).await
            } else if status.success() {
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

/// The attempt's callback was started before (the stop is sent again after a restart): it is
/// not run again. If it still runs, it is waited for (its timeout, counted from now) and
/// killed past it; the result is the exit code it recorded.
async fn earlier_callback(
    dir: &Path,
    claim: &str,
    code_file: &str,
    limit: Duration,
) -> (bool, String) {
    if let Some(pid) = read_number(&dir.join(claim)) {
        if is_our_callback(pid, dir).await && !wait_group_gone(pid, limit).await {
            signal_group(pid, "KILL").await;
            return (
                false,
                format!(
                    "abort callback (started before a restart, not run again) timed out {} ms after the restart",
                    limit.as_millis()
                ),
            );
        }
    }
    match read_number::<i32>(&dir.join(code_file)) {
        Some(0) => (
            true,
            "abort callback (started before a restart, not run again) finished".into(),
        ),
        Some(code) => (
            false,
            format!("abort callback (started before a restart, not run again) failed (exit code {code})"),
        ),
        None => (
            false,
            "abort callback (started before a restart, not run again) ended without an exit code".into(),
        ),
    }
}

/// The first number in a small file (a pid, an exit code).
fn read_number<T: std::str::FromStr>(path: &Path) -> Option<T> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
