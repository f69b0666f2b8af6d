//! A simulated pool: declared nodes and GPUs, no processes. A job "runs" for its declared
//! duration and then succeeds; a stop runs the abort callback's simulated checkpoint (it takes
//! `checkpoint_ms`, and counts as checkpointed when that fits the callback's timeout), then
//! reports `Stopped`. Used by the demo, the tests and the benchmarks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Adopt, Events, ExecEvent, Executor, Launch, StopReason};

struct Running {
    timer: tokio::task::JoinHandle<()>,
    abort_timeout_ms: Option<i64>,
}

pub struct SimulatedExecutor {
    events: Events,
    /// How long a simulated abort callback takes to checkpoint.
    checkpoint_ms: i64,
    jobs: Arc<Mutex<HashMap<String, Running>>>,
}

impl SimulatedExecutor {
    pub fn new(events: Events, checkpoint_ms: i64) -> SimulatedExecutor {
        SimulatedExecutor {
            events,
            checkpoint_ms,
            jobs: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn run_for(&self, job: &Launch, remaining_ms: i64) {
        let id = job.job_id.clone();
        let events = self.events.clone();
        let jobs = self.jobs.clone();
        let timer = tokio::spawn({
            let id = id.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(remaining_ms.max(0) as u64)).await;
                let ended = jobs
                    .lock()
                    .map(|mut j| j.remove(&id).is_some())
                    .unwrap_or(false);
                if ended {
                    let _ = events.send(ExecEvent::Exited {
                        job_id: id,
                        code: 0,
                    });
                }
            }
        });
        if let Ok(mut j) = self.jobs.lock() {
            if let Some(old) = j.insert(
                id,
                Running {
                    timer,
                    abort_timeout_ms: job.abort.as_ref().map(|a| a.timeout_ms),
                },
            ) {
                old.timer.abort();
            }
        }
    }

    pub fn running(&self) -> usize {
        self.jobs.lock().map(|j| j.len()).unwrap_or(0)
    }
}

#[async_trait::async_trait]
impl Executor for SimulatedExecutor {
    async fn launch(&self, job: Launch) {
        let _ = self.events.send(ExecEvent::Running {
            job_id: job.job_id.clone(),
            handle: format!("sim:{}", job.node),
        });
        let duration = job.duration_ms.unwrap_or(60_000);
        self.run_for(&job, duration);
    }

    async fn stop(&self, job_id: &str, reason: StopReason, _grace_ms: i64) {
        let entry = self.jobs.lock().ok().and_then(|mut j| j.remove(job_id));
        let Some(entry) = entry else {
            let _ = self.events.send(ExecEvent::Stopped {
                job_id: job_id.to_string(),
                checkpointed: false,
                detail: "not running".into(),
            });
            return;
        };
        entry.timer.abort();
        let events = self.events.clone();
        let id = job_id.to_string();
        let checkpoint_ms = self.checkpoint_ms;
        tokio::spawn(async move {
            let (checkpointed, detail) = match entry.abort_timeout_ms {
                Some(timeout) => {
                    let took = checkpoint_ms.min(timeout);
                    tokio::time::sleep(Duration::from_millis(took.max(0) as u64)).await;
                    if checkpoint_ms <= timeout {
                        (
                            true,
                            format!(
                                "abort callback checkpointed in {took} ms (simulated); stopped"
                            ),
                        )
                    } else {
                        (
                            false,
                            format!(
                                "abort callback timed out after {timeout} ms (simulated); killed"
                            ),
                        )
                    }
                }
                None => (false, "no abort callback; stopped (simulated)".to_string()),
            };
            let why = match reason {
                StopReason::Preempt => "preempted",
                StopReason::Abort => "aborted",
                StopReason::MaxRuntime => "max runtime reached",
            };
            let _ = events.send(ExecEvent::Stopped {
                job_id: id,
                checkpointed,
                detail: format!("{why}: {detail}"),
            });
        });
    }

    async fn adopt(&self, job: Adopt) {
        // A simulated job survives a restart of the control plane, like a real one would: it
        // goes on for what is left of its duration.
        let elapsed = job.now - job.started_at;
        let remaining = job.launch.duration_ms.unwrap_or(60_000) - elapsed;
        if job.handle.is_none() {
            let _ = self.events.send(ExecEvent::Running {
                job_id: job.launch.job_id.clone(),
                handle: format!("sim:{}", job.launch.node),
            });
        }
        self.run_for(&job.launch, remaining);
    }
}

#[cfg(test)]
mod tests {
    use super::super::AbortCallback;
    use super::*;

    fn launch(id: &str, duration: i64, abort: Option<i64>) -> Launch {
        Launch {
            job_id: id.into(),
            resume_count: 0,
            command: "train".into(),
            image: None,
            env: vec![],
            checkpoint_dir: None,
            abort: abort.map(|t| AbortCallback {
                kind: super::super::AbortKind::Bash,
                command: "save".into(),
                timeout_ms: t,
            }),
            node: "n1".into(),
            devices: vec![(0, 1000)],
            duration_ms: Some(duration),
        }
    }

    #[tokio::test]
    async fn runs_for_its_duration_then_succeeds() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let ex = SimulatedExecutor::new(tx, 10);
        ex.launch(launch("a", 30, None)).await;
        assert!(matches!(rx.recv().await, Some(ExecEvent::Running { .. })));
        assert_eq!(
            rx.recv().await,
            Some(ExecEvent::Exited {
                job_id: "a".into(),
                code: 0
            })
        );
        assert_eq!(ex.running(), 0);
    }

    #[tokio::test]
    async fn stop_checkpoints_within_the_callback_timeout() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let ex = SimulatedExecutor::new(tx, 10);
        ex.launch(launch("a", 60_000, Some(1000))).await;
        ex.launch(launch("b", 60_000, Some(5))).await;
        rx.recv().await;
        rx.recv().await;
        ex.stop("a", StopReason::Preempt, 0).await;
        ex.stop("b", StopReason::Preempt, 0).await;
        let mut got = [rx.recv().await.unwrap(), rx.recv().await.unwrap()];
        got.sort_by_key(|e| format!("{e:?}"));
        match &got[0] {
            ExecEvent::Stopped {
                job_id,
                checkpointed,
                ..
            } => assert!(job_id == "a" && *checkpointed),
            other => panic!("{other:?}"),
        }
        match &got[1] {
            ExecEvent::Stopped {
                job_id,
                checkpointed,
                detail,
            } => assert!(job_id == "b" && !*checkpointed && detail.contains("timed out")),
            other => panic!("{other:?}"),
        }
        // Stopped jobs never report an exit afterwards.
        assert!(tokio::time::timeout(Duration::from_millis(50), rx.recv())
            .await
            .is_err());
    }
}
