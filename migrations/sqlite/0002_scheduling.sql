-- Resource policies and scheduling: pools, profiles, policies, queues, jobs and their history.
-- Kept in step with the other dialect. GPU amounts are integer milli-GPUs (1000 = one GPU).

-- Capacity. owner_tenant_id NULL = shared by every tenant; otherwise dedicated to one tenant.
CREATE TABLE pools (
    id               TEXT PRIMARY KEY,
    owner_tenant_id  TEXT REFERENCES tenants(id),
    name             TEXT NOT NULL UNIQUE,
    executor         TEXT NOT NULL,
    -- JSON: [{"name", "gpus", "gpu_model", "gpu_memory_mb", "cpu_cores", "memory_mb"}]
    nodes            TEXT NOT NULL,
    gpu_hour_cost_cents BIGINT NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL
);

-- What one job gets: a fixed amount, or the job's request within [min, max].
CREATE TABLE profiles (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenants(id),
    name           TEXT NOT NULL,
    gpu_milli      BIGINT NOT NULL,
    min_gpu_milli  BIGINT NOT NULL,
    max_gpu_milli  BIGINT NOT NULL,
    gpu_memory_mb  BIGINT NOT NULL DEFAULT 0,
    cpu_milli      BIGINT NOT NULL DEFAULT 0,
    memory_mb      BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

-- One policy per group: reservation (guaranteed) and limit (cap) over the pools of its queues.
CREATE TABLE policies (
    id                  TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL REFERENCES tenants(id),
    group_id            TEXT NOT NULL UNIQUE REFERENCES groups(id),
    reservation_milli   BIGINT NOT NULL,
    limit_milli         BIGINT NOT NULL,
    over_quota_weight   BIGINT NOT NULL,
    over_quota_allowed  BIGINT NOT NULL,
    -- JSON array of user ids that may exceed the reservation; empty = every member.
    exceed_users        TEXT NOT NULL DEFAULT '[]',
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL
);

CREATE TABLE queues (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    name        TEXT NOT NULL,
    policy_id   TEXT NOT NULL REFERENCES policies(id),
    profile_id  TEXT NOT NULL REFERENCES profiles(id),
    -- JSON array of pool ids in order; the later ones are spillover.
    pools       TEXT NOT NULL,
    over_quota  BIGINT NOT NULL,
    -- JSON: [{"name", "priority", "preemptible"}]
    classes     TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE jobs (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id),
    queue_id          TEXT NOT NULL REFERENCES queues(id),
    group_id          TEXT NOT NULL REFERENCES groups(id),
    user_id           TEXT NOT NULL,
    username          TEXT NOT NULL,
    name              TEXT NOT NULL,
    command           TEXT NOT NULL,
    image             TEXT,
    env               TEXT NOT NULL DEFAULT '{}',
    gpu_milli         BIGINT NOT NULL,
    gpu_memory_mb     BIGINT NOT NULL DEFAULT 0,
    priority_class    TEXT NOT NULL,
    priority          BIGINT NOT NULL,
    preemptible       BIGINT NOT NULL,
    abort_kind        TEXT,
    abort_command     TEXT,
    abort_timeout_ms  BIGINT NOT NULL DEFAULT 0,
    checkpoint_dir    TEXT,
    max_runtime_ms    BIGINT,
    duration_ms       BIGINT,
    state             TEXT NOT NULL,
    wait_code         TEXT,
    wait_reason       TEXT,
    pool_id           TEXT,
    node              BIGINT,
    node_name         TEXT,
    -- JSON: [[device, milli], ...]
    slices            TEXT,
    over_quota        BIGINT NOT NULL DEFAULT 0,
    preempted_for     TEXT,
    stop_reason       TEXT,
    handle            TEXT,
    resume_count      BIGINT NOT NULL DEFAULT 0,
    exit_code         BIGINT,
    detail            TEXT,
    submitted_at      BIGINT NOT NULL,
    queued_at         BIGINT NOT NULL,
    admitted_at       BIGINT,
    started_at        BIGINT,
    finished_at       BIGINT,
    updated_at        BIGINT NOT NULL
);
CREATE INDEX jobs_state ON jobs (state);
CREATE INDEX jobs_user ON jobs (tenant_id, user_id, submitted_at);
CREATE INDEX jobs_queue ON jobs (queue_id, state);

-- Every state transition of a job.
CREATE TABLE job_events (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    job_id      TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    at          BIGINT NOT NULL,
    from_state  TEXT,
    to_state    TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX job_events_job ON job_events (job_id, at);

-- Preemptions, seen from both sides (they may be different tenants on a shared pool).
CREATE TABLE preemptions (
    id                TEXT PRIMARY KEY,
    at                BIGINT NOT NULL,
    pool_id           TEXT NOT NULL,
    victim_tenant_id  TEXT NOT NULL,
    victim_job_id     TEXT NOT NULL,
    victim_group_id   TEXT NOT NULL,
    for_tenant_id     TEXT NOT NULL,
    for_job_id        TEXT NOT NULL,
    for_group_id      TEXT NOT NULL,
    gpu_milli         BIGINT NOT NULL,
    reason            TEXT NOT NULL
);
CREATE INDEX preemptions_victim ON preemptions (victim_tenant_id, at);
CREATE INDEX preemptions_for ON preemptions (for_tenant_id, at);
