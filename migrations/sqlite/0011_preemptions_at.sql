-- The scheduler reads, every cycle, the recent preemptions (the last hour): which victims still
-- stop for a waiting job, and whether all of them have. Read by time, so a cycle's cost does
-- not grow with the waiting jobs.
CREATE INDEX preemptions_at ON preemptions (at);
