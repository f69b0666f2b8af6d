-- Tenant grants on shared pools: the most a tenant's group policies may reserve on a shared
-- pool (set by platform admins; the grants of one pool never exceed its capacity).
CREATE TABLE pool_grants (
    pool_id           TEXT NOT NULL REFERENCES pools(id) ON DELETE CASCADE,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    reservation_milli BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    PRIMARY KEY (pool_id, tenant_id)
);
CREATE INDEX pool_grants_tenant ON pool_grants (tenant_id);

-- Caps on waiting jobs per user and per group are checked at submit.
CREATE INDEX jobs_user_state ON jobs (tenant_id, user_id, state);
CREATE INDEX jobs_group_state ON jobs (group_id, state);
