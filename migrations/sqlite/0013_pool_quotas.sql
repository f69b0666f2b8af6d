-- Per-pool quotas of a group's policy (as node-pool quotas): on a pool listed here the group's
-- use never exceeds limit_milli, and only reservation_milli of it there is within its
-- reservation. Pools not listed are bound only by the policy's overall reservation and limit.
-- Owned by the policy domain with `policies`.
CREATE TABLE policy_pools (
    policy_id          TEXT NOT NULL REFERENCES policies(id) ON DELETE CASCADE,
    pool_id            TEXT NOT NULL REFERENCES pools(id) ON DELETE CASCADE,
    reservation_milli  BIGINT NOT NULL,
    limit_milli        BIGINT NOT NULL,
    PRIMARY KEY (policy_id, pool_id)
);
