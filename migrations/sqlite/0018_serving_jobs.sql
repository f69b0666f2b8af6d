-- Serving jobs: a job that serves an endpoint of the gateway on a port. While it runs (and
-- once its port answers) it is one of the endpoint's instances. Written by the scheduler
-- with the job; read by the gateway.
ALTER TABLE jobs ADD COLUMN serve_endpoint_id TEXT;
ALTER TABLE jobs ADD COLUMN serve_port BIGINT;
CREATE INDEX jobs_serving ON jobs (state) WHERE serve_endpoint_id IS NOT NULL;
