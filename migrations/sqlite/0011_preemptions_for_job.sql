-- The scheduler reads, every cycle, the preemptions made for each waiting job (which victims
-- still stop for it, and whether all of them have).
CREATE INDEX preemptions_for_job ON preemptions (for_job_id, at);
