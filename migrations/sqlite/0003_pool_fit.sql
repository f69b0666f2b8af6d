-- What the submit path needs to know about a pool's shape without reading its node list:
-- the most GPUs on one node (whole-GPU jobs must fit on one node) and the largest GPU memory
-- among nodes with GPUs (fractional jobs with a memory floor). Pools are not edited after
-- creation; `create_pool` writes these with the row.
ALTER TABLE pools ADD COLUMN fit_gpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pools ADD COLUMN fit_gpu_memory_mb BIGINT NOT NULL DEFAULT 0;
UPDATE pools SET
    fit_gpus = COALESCE((SELECT MAX(CAST(json_extract(n.value, '$.gpus') AS INTEGER)) FROM json_each(pools.nodes) n), 0),
    fit_gpu_memory_mb = COALESCE((SELECT MAX(CAST(json_extract(n.value, '$.gpu_memory_mb') AS INTEGER)) FROM json_each(pools.nodes) n
                                  WHERE CAST(json_extract(n.value, '$.gpus') AS INTEGER) > 0), 0);
