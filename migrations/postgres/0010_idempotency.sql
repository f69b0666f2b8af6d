-- Idempotent submits: a retried request with the same Idempotency-Key gets the jobs the first
-- one created instead of new ones. Kept for 24 hours.
CREATE TABLE idempotency_keys (
    tenant_id      TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL,
    idem_key       TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    job_ids        TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, user_id, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
