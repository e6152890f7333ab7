-- What ctx.wait_for returns (docs/durable.md#children): the children $2 of the job $1,
-- each with its state, result and last error.
SELECT id, status, result, last_error
FROM {schema}.jobs
WHERE id = ANY($2::bigint[]) AND spawned_by = $1
