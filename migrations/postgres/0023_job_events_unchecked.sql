-- A job's events are written by the scheduler alone (`scheduler/`, the table's one owner), in
-- the transaction that writes the job's row, and only for a row that statement inserted or
-- returned; jobs are never deleted. The foreign key to `jobs` checked that again on every
-- event: a `SELECT … FOR KEY SHARE` of the job's row, which also writes a lock into that row
-- (a second WAL record per event). Four events per job made it about half of each event's
-- insert. The index by job stays: it serves the job page's history.
ALTER TABLE job_events DROP CONSTRAINT job_events_job_id_fkey;
