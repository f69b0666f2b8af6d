//! The local executor against real processes: output, environment, stops and abort
//! callbacks here; a control plane restarted over running jobs in `restart`.

mod restart;

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
    let stat = "1234 (we ird) name)) S 1 1234 1234 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
    let parsed = parse_stat(stat).unwrap();
    assert_eq!(parsed.state, 'S');
    assert_eq!(parsed.pgrp, 1234);
    assert_eq!(parsed.start_time, 98765);
    assert!(parse_stat("garbage").is_none());
}
