-- What the scheduler's driver reads between cycles: the job rows changed since its last read,
-- found by a change number that only grows in commit order, so each change is read once and
-- nothing is read again "to be safe" (the earlier overlap window re-read every row written in
-- the last five seconds, every cycle).
--
-- PostgreSQL: the number is the writing transaction's id (64-bit, never wraps). Transactions
-- commit out of id order, so the driver reads from the oldest transaction still running at
-- its previous read (`pg_snapshot_xmin`), which includes every one that committed since. A
-- trigger sets it on every write of a job (a state or `updated_at` change, or a new row),
-- whatever the statement says. Changes of the wait reason alone keep their number: the driver
-- applies those to its snapshot itself.
ALTER TABLE jobs ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX jobs_change_seq ON jobs (change_seq);
DROP INDEX jobs_updated;

CREATE FUNCTION jobs_change_seq() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.updated_at IS DISTINCT FROM OLD.updated_at
        OR NEW.state IS DISTINCT FROM OLD.state THEN
        NEW.change_seq := pg_current_xact_id()::text::bigint;
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER jobs_change_seq BEFORE INSERT OR UPDATE ON jobs
FOR EACH ROW EXECUTE FUNCTION jobs_change_seq();
