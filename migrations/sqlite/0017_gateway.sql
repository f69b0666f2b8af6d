-- The AI Application Gateway (owned by the gateway domain, `server/src/gateway/`).
--
-- An endpoint is a named service of a project; its instances are registered addresses
-- (serving jobs of the scheduler join them later). A gateway is a namespace-scoped instance
-- (prod, dev, ...) with its own listener port, allocated from the server's range, and its own
-- tokens. A route publishes an endpoint on one gateway under a host and/or path prefix.
CREATE TABLE endpoints (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    project_id   TEXT NOT NULL REFERENCES projects(id),
    name         TEXT NOT NULL,
    -- 1: callable without a token (a tenant admin's explicit choice).
    public       BIGINT NOT NULL DEFAULT 0,
    owner_id     TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at   BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE endpoint_targets (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    endpoint_id  TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    -- host:port of the upstream instance.
    address      TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    UNIQUE (endpoint_id, address)
);

CREATE TABLE gateways (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    name         TEXT NOT NULL,
    port         BIGINT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE gateway_routes (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    gateway_id   TEXT NOT NULL REFERENCES gateways(id) ON DELETE CASCADE,
    -- '' matches any host.
    host         TEXT NOT NULL DEFAULT '',
    path_prefix  TEXT NOT NULL,
    endpoint_id  TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    created_at   BIGINT NOT NULL,
    UNIQUE (gateway_id, host, path_prefix)
);

CREATE TABLE gateway_tokens (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    gateway_id   TEXT NOT NULL REFERENCES gateways(id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    -- 'user': the user's current rights; 'endpoint': only the endpoints named.
    kind         TEXT NOT NULL,
    endpoint_ids TEXT NOT NULL DEFAULT '[]',
    -- SHA-256 of the secret; the secret is shown once.
    token_hash   TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    expires_at   BIGINT,
    revoked_at   BIGINT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX gateway_tokens_user ON gateway_tokens (tenant_id, user_id);
