-- Reads that must not grow with the waiting jobs of a tenant: the driver reads the job rows
-- changed since its last cycle (updated_at); the overview's wait statistics read the jobs
-- started in the last hour; the jobs list pages newest first, for the tenant or one user.
CREATE INDEX jobs_updated ON jobs (updated_at);
CREATE INDEX jobs_tenant_started ON jobs (tenant_id, started_at);
CREATE INDEX jobs_tenant_id ON jobs (tenant_id, id);
CREATE INDEX jobs_tenant_user_id ON jobs (tenant_id, user_id, id);
