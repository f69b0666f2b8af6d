//! The core's inputs and outputs: the snapshot of pools, groups, queues and jobs, and the
//! decisions of a cycle.

pub type MilliGpu = u32;
pub const WHOLE: MilliGpu = app::model::WHOLE_GPU_MILLI as MilliGpu;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub memory_mb: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub devices: Vec<Device>,
    /// CPU of the node in milli-cores; 0 = not declared (not checked).
    pub cpu_milli: u32,
    /// Host memory of the node, MiB; 0 = not declared (not checked).
    pub ram_mb: u32,
}

/// What a job takes on its node: GPUs, GPU memory per device (fractions; 0 = proportional to
/// the fraction), CPU and host memory (0 = none asked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Demand {
    pub gpus: MilliGpu,
    pub memory_mb: u32,
    pub cpu_milli: u32,
    pub ram_mb: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub nodes: Vec<Node>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupPolicy {
    /// The tenant the group belongs to: priorities compare only within a tenant.
    pub tenant: u32,
    /// Guaranteed milli-GPUs.
    pub reservation: MilliGpu,
    /// Hard cap in milli-GPUs.
    pub limit: MilliGpu,
    pub over_quota_weight: u32,
    pub over_quota_allowed: bool,
    /// Per-pool quotas, beside the overall reservation and limit (see "Per-pool quotas" in
    /// the module docs).
    pub pool_quotas: Vec<PoolQuota>,
}

/// A group's quota on one pool: its use there never exceeds `limit`, and only `reservation`
/// of it there counts as within its reservation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolQuota {
    pub pool: u32,
    pub reservation: MilliGpu,
    pub limit: MilliGpu,
}

impl GroupPolicy {
    pub fn quota_on(&self, pool: u32) -> Option<&PoolQuota> {
        self.pool_quotas.iter().find(|q| q.pool == pool)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Queue {
    pub group: u32,
    /// Pool indices in order; the later ones are spillover.
    pub pools: Vec<u32>,
    pub over_quota: bool,
    /// How long its jobs run before they may be preempted; `None`: the snapshot's default.
    pub min_runtime_ms: Option<i64>,
}

/// Where a job runs: one node, and the milli-GPUs it holds on each of its devices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub pool: u32,
    pub node: u32,
    pub slices: Vec<(u32, MilliGpu)>,
}

#[derive(Clone, Debug, Default)]
pub struct RunningJob {
    pub id: u64,
    pub queue: u32,
    pub priority: i32,
    pub preemptible: bool,
    pub gpus: MilliGpu,
    /// GPU memory held per device (fractions), MiB.
    pub memory_mb: u32,
    /// CPU (milli-cores) and host memory (MiB) it holds on its node.
    pub cpu_milli: u32,
    pub ram_mb: u32,
    pub placement: Placement,
    pub started_at: i64,
    /// Already being preempted to give its group's capacity back to this group.
    pub preempted_for: Option<u32>,
    /// The job it is being preempted for, when known.
    pub preempted_for_job: Option<u64>,
    /// How many times it was preempted before this run: each one lengthens its protection
    /// (see [`protected_until`]).
    pub preemptions: u32,
}

#[derive(Clone, Debug, Default)]
pub struct PendingJob {
    pub id: u64,
    pub queue: u32,
    pub priority: i32,
    pub preemptible: bool,
    /// The user may exceed the group's reservation.
    pub may_exceed: bool,
    pub gpus: MilliGpu,
    /// GPU memory needed on its device, MiB (fractions); 0 = proportional to the fraction.
    pub memory_mb: u32,
    /// CPU (milli-cores) and host memory (MiB) it needs on its node; 0 = none.
    pub cpu_milli: u32,
    pub ram_mb: u32,
    pub submitted_at: i64,
    /// When it last entered the queue (its submit, or its requeue after a preemption): how
    /// long it has waited counts from here.
    pub waiting_since: i64,
}

impl PendingJob {
    pub fn demand(&self) -> Demand {
        Demand {
            gpus: self.gpus,
            memory_mb: self.memory_mb,
            cpu_milli: self.cpu_milli,
            ram_mb: self.ram_mb,
        }
    }
}

impl RunningJob {
    pub fn demand(&self) -> Demand {
        Demand {
            gpus: self.gpus,
            memory_mb: self.memory_mb,
            cpu_milli: self.cpu_milli,
            ram_mb: self.ram_mb,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub now: i64,
    pub min_runtime_ms: i64,
    /// An in-quota job of whole GPUs that has waited this long for room gets a node held for
    /// it (see "Starvation" in the module docs); `None`: never.
    pub hold_after_ms: Option<i64>,
    /// Pending jobs whose victims have all stopped: the capacity they freed is theirs, so
    /// these are placed first (before holds and the in-quota order).
    pub reclaimed_for: Vec<u64>,
    pub pools: Vec<Pool>,
    pub groups: Vec<GroupPolicy>,
    pub queues: Vec<Queue>,
    pub running: Vec<RunningJob>,
    pub pending: Vec<PendingJob>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admit {
    pub job: u64,
    pub placement: Placement,
    pub over_quota: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preempt {
    pub victim: u64,
    pub victim_group: u32,
    pub for_job: u64,
    pub for_group: u32,
}

/// Why a pending job was not admitted this cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// Admitting it would exceed the group's limit.
    OverLimit { used: MilliGpu, limit: MilliGpu },
    /// The group is at its reservation and this job may not borrow.
    QuotaExhausted {
        used: MilliGpu,
        reservation: MilliGpu,
    },
    /// Within quota, but no node of its pools has room; reclaimable capacity is not enough.
    /// `short` says what is missing.
    NoCapacity { short: Short },
    /// Capacity is being reclaimed for it from these over-quota jobs.
    WaitingForPreemption { victims: Vec<u64> },
    /// It waited past the hold threshold: a node is held for it (nothing new starts there)
    /// and has `free` of the `needed` whole GPUs free so far.
    CapacityHeld { free: MilliGpu, needed: MilliGpu },
    /// Its group's job `job` waited past the hold threshold, and the group's jobs behind it
    /// wait until it has started.
    BehindHeldJob { job: u64 },
    /// Borrowing, but idle capacity went to groups with a smaller fair share, or none is idle.
    NoIdleCapacity,
    /// The request can never be placed (larger than any node, bad amount, unknown queue).
    Unschedulable,
}

/// What a job that does not fit lacks (see [`WaitReason::NoCapacity`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Short {
    /// Too few GPUs are free in its queue's pools.
    Gpus,
    /// Enough GPUs are free in all, but not together on one node (or, for a fraction, on one
    /// device).
    Fragmented,
    /// A device has the milli-GPUs but not the GPU memory the job asks for.
    GpuMemory,
    /// A node has the GPUs but not the CPU of the job's profile.
    Cpu,
    /// A node has the GPUs but not the host memory of the job's profile.
    HostMemory,
    /// The room there is is held for another job (a starving one, or one whose victims stop).
    Held,
    /// Borrowed GPUs that could be reclaimed for it run jobs still protected by their minimum
    /// runtime; the first protection ends at `until`.
    Protected { until: i64 },
}

impl Short {
    /// How close a miss of this kind is (the closest one explains the wait).
    pub(crate) fn closeness(self) -> u8 {
        match self {
            Short::Gpus => 0,
            Short::Fragmented => 1,
            Short::GpuMemory => 2,
            Short::HostMemory => 3,
            Short::Cpu => 4,
            Short::Held => 5,
            Short::Protected { .. } => 6,
        }
    }
}

/// The reason given before the cause is known (filled in at the end of the cycle).
pub(super) const NO_CAPACITY: WaitReason = WaitReason::NoCapacity { short: Short::Gpus };

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    pub admits: Vec<Admit>,
    pub preempts: Vec<Preempt>,
    pub waiting: Vec<(u64, WaitReason)>,
    /// Nodes held this cycle for starving jobs: (job, pool, node, owed: within its group's
    /// reservation, so even other groups' in-quota jobs keep off).
    pub held: Vec<(u64, u32, u32, bool)>,
}
