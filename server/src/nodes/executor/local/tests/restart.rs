//! A control plane restarted over running jobs: adoption (with or without a stored handle), a
//! relaunch over an earlier wrapper, and a stop sent again while its callback runs.

use super::*;

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
            stop: None,
            now: 0,
        })
        .await;
    second
        .adopt(Adopt {
            launch: long,
            handle: Some(long_pid.to_string()),
            started_at: 0,
            stop: None,
            now: 0,
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
            stop: None,
            now: 0,
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
            stop: None,
            now: 0,
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
            stop: None,
            now: 0,
        })
        .await;
    assert!(matches!(
        next(&mut rx2).await,
        ExecEvent::Lost { job_id, .. } if job_id == "reused"
    ));
    assert_eq!(second.running(), 0);
}

/// The control plane died after committing `starting` and before committing `running`: the
/// adopter gets no handle. It finds the attempt's wrapper by the pid file the wrapper writes
/// before the job starts, and reports it `Running` (it used to report it lost, with the
/// process still running and its GPUs handed to the next job). An attempt that never started
/// starts now, or is reported stopped when a stop is stored for it.
#[tokio::test]
async fn adopt_without_a_handle_finds_the_wrapper_or_starts_the_job() {
    let dir = TempDir::new("nohandle");
    let (tx1, mut rx1) = unbounded_channel();
    let first = LocalExecutor::new(dir.0.clone(), tx1);
    let mut long = job("long", "sleep 1000");
    long.resume_count = 2;
    first.launch(long.clone()).await;
    let pid = running_pid(&mut rx1, "long").await;
    let (tx2, mut rx2) = unbounded_channel();
    let second = LocalExecutor::new(dir.0.clone(), tx2);
    for stop in [None, Some(StopReason::Preempt)] {
        // (A second adopt of what is already watched changes nothing.)
        second
            .adopt(Adopt {
                launch: long.clone(),
                handle: None,
                started_at: 0,
                stop,
                now: 0,
            })
            .await;
    }
    assert_eq!(running_pid(&mut rx2, "long").await, pid, "the same process");
    assert_eq!(second.running(), 1);
    quiet(&mut rx2, 300).await;
    second.stop("long", StopReason::Preempt, 1000).await;
    stopped(next(&mut rx2).await, "long");
    assert!(dead(pid));

    // The pid file of an earlier attempt does not count: this attempt never started, so it
    // starts now.
    let mut again = long.clone();
    again.resume_count = 3;
    again.command = "exit 4".into();
    second
        .adopt(Adopt {
            launch: again,
            handle: None,
            started_at: 0,
            stop: None,
            now: 0,
        })
        .await;
    running_pid(&mut rx2, "long").await;
    assert_eq!(
        next(&mut rx2).await,
        ExecEvent::Exited {
            job_id: "long".into(),
            code: 4
        }
    );
    // Never started and being stopped: reported stopped, nothing runs.
    second
        .adopt(Adopt {
            launch: job("stopping", "touch ran"),
            handle: None,
            started_at: 0,
            stop: Some(StopReason::Abort),
            now: 0,
        })
        .await;
    let (checkpointed, detail) = stopped(next(&mut rx2).await, "stopping");
    assert!(!checkpointed);
    assert_eq!(detail, "aborted: it had not started");
    quiet(&mut rx2, 300).await;
    assert!(!second.job_dir("stopping").join("ran").exists());
    assert_eq!(second.running(), 0);
    drop(rx1);
}

/// A relaunch of a job whose earlier wrapper still runs (left by a control plane that died)
/// kills that wrapper first: two copies never run.
#[tokio::test]
async fn a_relaunch_kills_an_earlier_wrapper_left_running() {
    let dir = TempDir::new("relaunch");
    let (tx1, mut rx1) = unbounded_channel();
    let first = LocalExecutor::new(dir.0.clone(), tx1);
    first.launch(job("j", "sleep 1000")).await;
    let old = running_pid(&mut rx1, "j").await;
    // (Once the wrapper has recorded itself.)
    for _ in 0..200 {
        if read_wrapper_pid(&first.job_dir("j")).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(read_wrapper_pid(&first.job_dir("j")), Some((old, 0)));
    let (tx2, mut rx2) = unbounded_channel();
    let second = LocalExecutor::new(dir.0.clone(), tx2);
    second.launch(job("j", "sleep 1000")).await;
    let new = running_pid(&mut rx2, "j").await;
    assert_ne!(old, new);
    for _ in 0..100 {
        if dead(old) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(dead(old), "the earlier wrapper {old} still runs");
    second.stop("j", StopReason::Abort, 1000).await;
    stopped(next(&mut rx2).await, "j");
    assert!(dead(new));
}

/// The control plane died while a job's abort callback ran; the restarted one adopts the job
/// and sends the stop again. The callback is not run a second time (it used to run again, at
/// the same time as the first, on the same checkpoint folder): the stop waits for the first
/// run and reports how it ended.
#[tokio::test]
async fn a_stop_sent_again_after_a_restart_runs_the_callback_once() {
    let dir = TempDir::new("once");
    let (tx1, mut rx1) = unbounded_channel();
    let first = LocalExecutor::new(dir.0.clone(), tx1);
    let mut launch = job("j", "sleep 1000");
    launch.checkpoint_dir = Some("ckpt".into());
    launch.abort = callback(
        AbortKind::Bash,
        r#"echo "run $SWITCHYARD_RESUME_COUNT" >> "$SWITCHYARD_CHECKPOINT_DIR/runs"; sleep 0.8"#,
        5000,
    );
    first.launch(launch.clone()).await;
    let pid = running_pid(&mut rx1, "j").await;
    first.stop("j", StopReason::Preempt, 2000).await;
    let runs = first.job_dir("j").join("ckpt/runs");
    for _ in 0..200 {
        if runs.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // "Restart" while the callback runs.
    let (tx2, mut rx2) = unbounded_channel();
    let second = LocalExecutor::new(dir.0.clone(), tx2);
    second
        .adopt(Adopt {
            launch,
            handle: Some(pid.to_string()),
            started_at: 0,
            stop: Some(StopReason::Preempt),
            now: 0,
        })
        .await;
    let started = Instant::now();
    second.stop("j", StopReason::Preempt, 2000).await;
    let (checkpointed, detail) = stopped(next(&mut rx2).await, "j");
    assert!(checkpointed, "{detail}");
    assert!(
        detail.contains("started before a restart, not run again) finished"),
        "{detail}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "it waited for the first run"
    );
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run 0\n");
    assert!(dead(pid));
    quiet(&mut rx2, 300).await;
    drop(rx1);
}
