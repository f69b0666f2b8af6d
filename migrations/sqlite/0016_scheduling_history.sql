-- Scheduling history: what the scheduler's leader counted, sampled once a minute, for the
-- charts of GPU allocation, queue depth and wait times over the last hour, day and week.
-- Owned by the scheduler's history module. Rows older than eight days are pruned as new ones
-- are written.
--
-- A sample set is one row of kind 'set' (its marker: the set was taken at `at`) and a row per
-- series that had something to count:
--   'pool'         every tenant's use of a pool (tenant_id: its owner; NULL for a shared pool),
--                  idle_milli = capacity not in use;
--   'tenant_pool'  one tenant's use of a shared pool, reserved_milli = its grant there;
--   'group'        a group's use, idle_milli = its reservation not in use, running and waiting
--                  jobs;
--   'queue'        a queue's running and waiting jobs (group_id: the queue's group), and the
--                  wait percentiles of the `started` jobs that started since the set before.
-- A series missing from a set counted zero then, so a bucket's average divides by its sets.
-- `generated` marks the demo's invented past (never measured).
CREATE TABLE scheduling_samples (
    at                BIGINT NOT NULL,
    kind              TEXT NOT NULL,
    tenant_id         TEXT,
    pool_id           TEXT,
    group_id          TEXT,
    queue_id          TEXT,
    in_quota_milli    BIGINT NOT NULL DEFAULT 0,
    over_quota_milli  BIGINT NOT NULL DEFAULT 0,
    idle_milli        BIGINT NOT NULL DEFAULT 0,
    reserved_milli    BIGINT NOT NULL DEFAULT 0,
    waiting           BIGINT NOT NULL DEFAULT 0,
    running           BIGINT NOT NULL DEFAULT 0,
    started           BIGINT NOT NULL DEFAULT 0,
    wait_p50_ms       BIGINT,
    wait_p90_ms       BIGINT,
    wait_p99_ms       BIGINT,
    generated         BIGINT NOT NULL DEFAULT 0
);
-- A window of one kind for one tenant (pools, groups, queues), and the prune by age.
CREATE INDEX scheduling_samples_series ON scheduling_samples (kind, tenant_id, at);
CREATE INDEX scheduling_samples_at ON scheduling_samples (at);
