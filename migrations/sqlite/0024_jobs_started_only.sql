-- The jobs by start time (0014) serve two reads, both of jobs started in a window
-- (`started_at >= …`): the overview's wait statistics and the history sampler. A job has no
-- start time until it runs, yet every write of its row before then (its insert, its
-- admission) wrote an entry in this index. Only jobs that have started are in it now.
DROP INDEX jobs_tenant_started;
CREATE INDEX jobs_tenant_started ON jobs (tenant_id, started_at) WHERE started_at IS NOT NULL;
