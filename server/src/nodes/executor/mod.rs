//! The executor seam: how admitted jobs reach the machines of a pool, and how what happens to
//! them comes back. The driver calls [`Executor::launch`], [`Executor::stop`] and
//! [`Executor::adopt`]; executors report through the [`ExecEvent`] sender they were built with.
//! Every fact an executor reports is committed by the driver (state transition + audit entry);
//! executors keep no state that matters beyond the process they run.
//!
//! Implementations here: [`simulated`] (declared nodes, jobs run for a declared duration) and
//! [`local`] (real processes on this host, in their own process group). The GPU node agent and
//! Kubernetes plug in behind the same trait: `launch` becomes "create a pod / send to the agent",
//! `stop` "run the abort hook, then delete with a grace period", `adopt` "watch the existing pod".

pub mod disabled;
pub mod local;
pub mod sandbox;
pub mod simulated;

use tokio::sync::mpsc::UnboundedSender;

/// What the job runs when it is told to stop gracefully (checkpoint, flush, deregister).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbortCallback {
    pub kind: AbortKind,
    pub command: String,
    /// How long the callback may take before the job is terminated anyway.
    pub timeout_ms: i64,
}

/// The interpreter of the callback, and why a job is being stopped: the API's own enums.
pub use app::model::{AbortKind, StopReason};

/// One attempt of a job, as handed to the executor.
#[derive(Clone, Debug)]
pub struct Launch {
    pub job_id: String,
    /// How many times the job was preempted and resumed before (0 on the first attempt).
    pub resume_count: i64,
    pub command: String,
    pub image: Option<String>,
    pub env: Vec<(String, String)>,
    pub checkpoint_dir: Option<String>,
    pub abort: Option<AbortCallback>,
    /// Node name and (device index, milli-GPU) slices the scheduler placed it on.
    pub node: String,
    pub devices: Vec<(u32, u32)>,
    /// Simulated pools only: how long the job runs before it succeeds.
    pub duration_ms: Option<i64>,
}

/// What an executor reports. `job_id` is the job's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecEvent {
    /// The job's process is up; `handle` lets a restarted control plane find it again
    /// (a process id, a pod name).
    Running { job_id: String, handle: String },
    /// The job ended on its own with this exit code (0 = success).
    Exited { job_id: String, code: i32 },
    /// The job ended because it was told to stop. `checkpointed`: its abort callback finished
    /// successfully within its timeout.
    Stopped {
        job_id: String,
        checkpointed: bool,
        detail: String,
    },
    /// The executor lost the job (node gone, process vanished without an exit code).
    Lost { job_id: String, reason: String },
}

/// A job the store says was running when the control plane (re)started.
#[derive(Clone, Debug)]
pub struct Adopt {
    pub launch: Launch,
    /// The handle of its `Running` event, if one was committed. `None`: the control plane
    /// stopped between committing `starting` and committing `running`, so the process may or
    /// may not have been started.
    pub handle: Option<String>,
    /// The stop stored for it (preempt, abort, runtime limit), if any: a job being stopped
    /// that never started is reported `Stopped`, not started now.
    pub stop: Option<StopReason>,
    /// When it started (ms since the epoch), for simulated durations.
    pub started_at: i64,
    /// Now, by the control plane's clock (the adopter measures what is left from it).
    pub now: i64,
}

pub type Events = UnboundedSender<ExecEvent>;

#[async_trait::async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Starts one attempt. Failures to start are reported as `Lost` (or `Exited` with the
    /// launcher's code), never panics.
    async fn launch(&self, job: Launch);
    /// Stops a job gracefully: runs its abort callback (bounded by its timeout), then
    /// terminates it (SIGTERM, `grace_ms`, SIGKILL on the local executor) and reports
    /// `Stopped`. Stopping an unknown job reports `Stopped` too, so the driver never waits
    /// forever.
    async fn stop(&self, job_id: &str, reason: StopReason, grace_ms: i64);
    /// Takes over a job that was running before a restart: watches it if it still exists
    /// (reporting `Running` with its handle when none was stored), reports its exit if it
    /// ended meanwhile, `Lost` if neither can be told. A job without a handle that provably
    /// never started is started now (or reported `Stopped` when a stop is stored for it).
    async fn adopt(&self, job: Adopt);
}
