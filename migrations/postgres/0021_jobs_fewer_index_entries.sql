-- Every write of a job row that changes its state (submit, admission, running, stop, end)
-- writes an entry in each index whose condition the new row meets. The reads below only
-- ever ask for waiting (`queued`) jobs by user and by queue, so those two indexes hold only
-- waiting jobs now: an admission, a `running` report or an end writes no entry in them.
-- (tenant_id, user_id, submitted_at) serves no read any more: lists and searches by user
-- page through (tenant_id, user_id, id) (0014).
DROP INDEX jobs_user;
DROP INDEX jobs_user_state;
CREATE INDEX jobs_user_queued ON jobs (tenant_id, user_id) WHERE state = 'queued';
DROP INDEX jobs_queue;
CREATE INDEX jobs_queue_queued ON jobs (queue_id) WHERE state = 'queued';
