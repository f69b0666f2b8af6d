//! The executor of a kind this server does not run (local pools while `allow_local_pools` is
//! off, or when the server cannot start jobs as the job user): every launch and adoption is
//! reported `Lost` with the reason, every stop `Stopped`, so no job waits on it forever and
//! nothing runs.

use super::{Adopt, Events, ExecEvent, Executor, Launch, StopReason};

pub struct DisabledExecutor {
    events: Events,
    reason: String,
}

impl DisabledExecutor {
    pub fn new(events: Events, reason: impl Into<String>) -> DisabledExecutor {
        DisabledExecutor {
            events,
            reason: reason.into(),
        }
    }
}

#[async_trait::async_trait]
impl Executor for DisabledExecutor {
    async fn launch(&self, job: Launch) {
        let _ = self.events.send(ExecEvent::Lost {
            job_id: job.job_id,
            reason: self.reason.clone(),
        });
    }

    async fn stop(&self, job_id: &str, _reason: StopReason, _grace_ms: i64) {
        let _ = self.events.send(ExecEvent::Stopped {
            job_id: job_id.to_string(),
            checkpointed: false,
            detail: self.reason.clone(),
        });
    }

    async fn adopt(&self, job: Adopt) {
        let _ = self.events.send(ExecEvent::Lost {
            job_id: job.launch.job_id,
            reason: self.reason.clone(),
        });
    }
}
