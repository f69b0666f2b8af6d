-- Node fit beyond GPUs: a job holds the CPU and host memory its queue's profile gives it, and
-- is placed only on a node that has them free. Jobs stored before keep their profile's figures.
ALTER TABLE jobs ADD COLUMN cpu_milli BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN memory_mb BIGINT NOT NULL DEFAULT 0;
UPDATE jobs SET
    cpu_milli = COALESCE((SELECT pr.cpu_milli FROM queues q JOIN profiles pr ON pr.id = q.profile_id WHERE q.id = jobs.queue_id), 0),
    memory_mb = COALESCE((SELECT pr.memory_mb FROM queues q JOIN profiles pr ON pr.id = q.profile_id WHERE q.id = jobs.queue_id), 0);
-- How long a queue's jobs run before they may be preempted; NULL: the server's default.
ALTER TABLE queues ADD COLUMN min_runtime_ms BIGINT;
