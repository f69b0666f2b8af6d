-- Foundation: tenants, identity, sessions, tokens, projects and the audit log.
-- Kept in step with the other dialect. Ids are text (UUIDv7), times are epoch milliseconds,
-- flags are 0/1 integers (the sqlx Any driver carries only basic types).

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    slug        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE users (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL REFERENCES tenants(id),
    username           TEXT NOT NULL,
    display_name       TEXT NOT NULL,
    email              TEXT,
    password_hash      TEXT,
    is_tenant_admin    BIGINT NOT NULL DEFAULT 0,
    is_platform_admin  BIGINT NOT NULL DEFAULT 0,
    disabled           BIGINT NOT NULL DEFAULT 0,
    created_at         BIGINT NOT NULL,
    UNIQUE (tenant_id, username)
);

CREATE TABLE groups (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    name         TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE memberships (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    group_id    TEXT NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

CREATE TABLE projects (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    name         TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    parent_id    TEXT REFERENCES projects(id),
    created_at   BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE api_tokens (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    prefix        TEXT NOT NULL,
    token_hash    TEXT NOT NULL UNIQUE,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    revoked_at    BIGINT,
    last_used_at  BIGINT
);
CREATE INDEX api_tokens_user ON api_tokens (tenant_id, user_id);

CREATE TABLE sessions (
    id_hash     TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    csrf_token  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

-- Append-only, hash-chained per tenant. audit_heads holds each chain's last link, so a deleted
-- tail is detected too, and its row lock serialises appends to one chain across replicas.
CREATE TABLE audit_log (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id    TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    at           BIGINT NOT NULL,
    actor_id     TEXT,
    actor_name   TEXT NOT NULL,
    action       TEXT NOT NULL,
    target_kind  TEXT NOT NULL,
    target_id    TEXT NOT NULL,
    summary      TEXT NOT NULL,
    source_ip    TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    prev_hash    TEXT NOT NULL,
    hash         TEXT NOT NULL,
    UNIQUE (tenant_id, seq)
);
CREATE INDEX audit_log_at ON audit_log (tenant_id, at);
CREATE INDEX audit_log_action ON audit_log (tenant_id, action);

CREATE TABLE audit_heads (
    tenant_id  TEXT PRIMARY KEY,
    seq        BIGINT NOT NULL,
    hash       TEXT NOT NULL
);
