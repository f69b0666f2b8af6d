-- A job's events are written by the scheduler alone (`scheduler/`, the table's one owner), in
-- the transaction that writes the job's row, and only for a row that statement inserted or
-- returned; jobs are never deleted. The foreign key to `jobs` checked that again on every
-- event (on PostgreSQL also writing a lock into the job's row). Dropped in both stores, so
-- they keep one schema. (SQLite cannot drop a constraint in place: the table is rebuilt,
-- rows kept.)
CREATE TABLE job_events_unchecked (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    at          BIGINT NOT NULL,
    from_state  TEXT,
    to_state    TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT ''
);
INSERT INTO job_events_unchecked (id, tenant_id, job_id, at, from_state, to_state, detail)
    SELECT id, tenant_id, job_id, at, from_state, to_state, detail FROM job_events;
DROP TABLE job_events;
ALTER TABLE job_events_unchecked RENAME TO job_events;
CREATE INDEX job_events_job ON job_events (job_id, at);
