-- One hash chain per tenant and writer. Every write transaction of a tenant used to take the
-- tenant's one chain head until it committed, so the scheduler's admissions and `running`
-- reports and the API's submits waited for each other. Now the scheduler's driver appends to
-- a chain of its own ('scheduler'); every other writer (requests, the CLI, sign-in) to 'api'.
-- Each chain is complete and gap-free on its own; `id` orders entries across chains. Entries
-- written before this migration are the 'api' chain, unchanged.
ALTER TABLE audit_log ADD COLUMN chain TEXT NOT NULL DEFAULT 'api';
ALTER TABLE audit_log ALTER COLUMN chain DROP DEFAULT;
ALTER TABLE audit_log DROP CONSTRAINT audit_log_tenant_id_seq_key;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_chain_seq UNIQUE (tenant_id, chain, seq);
-- The audit page and API list a tenant's entries newest first, by id.
CREATE INDEX audit_log_newest ON audit_log (tenant_id, id);

ALTER TABLE audit_heads ADD COLUMN chain TEXT NOT NULL DEFAULT 'api';
ALTER TABLE audit_heads ALTER COLUMN chain DROP DEFAULT;
ALTER TABLE audit_heads DROP CONSTRAINT audit_heads_pkey;
ALTER TABLE audit_heads ADD PRIMARY KEY (tenant_id, chain);
