-- Group-based access rules over resources, and the registered models and datasets they govern.

CREATE TABLE access_rules (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    group_id      TEXT NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
    -- view < use < manage < admin
    permission    TEXT NOT NULL,
    -- project, job, model, dataset, queue, endpoint
    resource_kind TEXT NOT NULL,
    -- one resource; NULL with project_id NULL: every resource of the kind
    resource_id   TEXT,
    -- a project subtree (the project and every project below it)
    project_id    TEXT REFERENCES projects(id) ON DELETE CASCADE,
    created_at    BIGINT NOT NULL
);
CREATE INDEX access_rules_tenant ON access_rules (tenant_id, resource_kind);

CREATE TABLE models (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    project_id    TEXT NOT NULL REFERENCES projects(id),
    name          TEXT NOT NULL,
    location_uri  TEXT NOT NULL,
    -- JSON object
    metadata      TEXT NOT NULL,
    owner_id      TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at    BIGINT NOT NULL,
    UNIQUE (tenant_id, project_id, name)
);

CREATE TABLE datasets (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    project_id    TEXT NOT NULL REFERENCES projects(id),
    name          TEXT NOT NULL,
    location_uri  TEXT NOT NULL,
    metadata      TEXT NOT NULL,
    owner_id      TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at    BIGINT NOT NULL,
    UNIQUE (tenant_id, project_id, name)
);
