-- What the submit path needs to know about a pool's shape without reading its node list:
-- the most GPUs on one node (whole-GPU jobs must fit on one node) and the largest GPU memory
-- among nodes with GPUs (fractional jobs with a memory floor). Pools are not edited after
-- creation; `create_pool` writes these with the row.
ALTER TABLE pools ADD COLUMN fit_gpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pools ADD COLUMN fit_gpu_memory_mb BIGINT NOT NULL DEFAULT 0;
UPDATE pools SET
    fit_gpus = COALESCE((SELECT MAX((n->>'gpus')::BIGINT) FROM jsonb_array_elements(pools.nodes::jsonb) n), 0),
    fit_gpu_memory_mb = COALESCE((SELECT MAX((n->>'gpu_memory_mb')::BIGINT) FROM jsonb_array_elements(pools.nodes::jsonb) n
                                  WHERE (n->>'gpus')::BIGINT > 0), 0);
