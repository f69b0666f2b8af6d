-- One hash chain per tenant and writer. Every write transaction of a tenant used to take the
-- tenant's one chain head until it committed, so the scheduler's admissions and `running`
-- reports and the API's submits waited for each other. Now the scheduler's driver appends to
-- a chain of its own ('scheduler'); every other writer (requests, the CLI, sign-in) to 'api'.
-- Each chain is complete and gap-free on its own; `id` orders entries across chains. Entries
-- written before this migration are the 'api' chain, unchanged. (SQLite cannot change a
-- table's unique constraint or primary key in place: both tables are rebuilt, ids kept.)
CREATE TABLE audit_log_chains (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id    TEXT NOT NULL,
    chain        TEXT NOT NULL,
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
    UNIQUE (tenant_id, chain, seq)
);
INSERT INTO audit_log_chains (id, tenant_id, chain, seq, at, actor_id, actor_name, action, target_kind, target_id, summary, source_ip, request_id, prev_hash, hash)
    SELECT id, tenant_id, 'api', seq, at, actor_id, actor_name, action, target_kind, target_id, summary, source_ip, request_id, prev_hash, hash FROM audit_log;
DROP TABLE audit_log;
ALTER TABLE audit_log_chains RENAME TO audit_log;
CREATE INDEX audit_log_at ON audit_log (tenant_id, at);
CREATE INDEX audit_log_action ON audit_log (tenant_id, action);
-- The audit page and API list a tenant's entries newest first, by id.
CREATE INDEX audit_log_newest ON audit_log (tenant_id, id);

CREATE TABLE audit_heads_chains (
    tenant_id  TEXT NOT NULL,
    chain      TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    hash       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, chain)
);
INSERT INTO audit_heads_chains (tenant_id, chain, seq, hash) SELECT tenant_id, 'api', seq, hash FROM audit_heads;
DROP TABLE audit_heads;
ALTER TABLE audit_heads_chains RENAME TO audit_heads;
