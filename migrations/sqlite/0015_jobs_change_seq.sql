-- What the scheduler's driver reads between cycles: the job rows changed since its last read,
-- found by a change number that only grows in commit order, so each change is read once and
-- nothing is read again "to be safe" (the earlier overlap window re-read every row written in
-- the last five seconds, every cycle).
--
-- SQLite: writers are serialized, so the number is the largest one so far plus one, taken
-- under the write lock. The driver's own statements set it in the statement (no second row
-- write); the triggers give it to every other write of a job (a state or `updated_at`
-- change, or a new row) that did not. Changes of the wait reason alone keep their number:
-- the driver applies those to its snapshot itself.
ALTER TABLE jobs ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
UPDATE jobs SET change_seq = rowid;
CREATE INDEX jobs_change_seq ON jobs (change_seq);
DROP INDEX jobs_updated;

CREATE TRIGGER jobs_change_seq_insert AFTER INSERT ON jobs
WHEN NEW.change_seq = 0
BEGIN
    UPDATE jobs SET change_seq = (SELECT MAX(change_seq) + 1 FROM jobs) WHERE rowid = NEW.rowid;
END;

CREATE TRIGGER jobs_change_seq_update AFTER UPDATE ON jobs
WHEN NEW.change_seq = OLD.change_seq
    AND (NEW.updated_at IS NOT OLD.updated_at OR NEW.state IS NOT OLD.state)
BEGIN
    UPDATE jobs SET change_seq = (SELECT MAX(change_seq) + 1 FROM jobs) WHERE rowid = NEW.rowid;
END;
