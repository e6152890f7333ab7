-- Changes a job that has not started (PATCH /jobs/{id}): pending, whether due, scheduled
-- or waiting to retry. NULL keeps a field. The row's lock orders this against a claim:
-- a job claimed meanwhile is no longer pending, and nothing changes (the caller reads
-- it for its state). Workers are told of its queue from the start, as the job may now
-- be due, or in another queue, behind where their claims resume (migration 0011).
-- $2: run_at; $3: delay in seconds from now (one of the two, or neither); $8 is "now".
-- $9: the tags as a JSON array, $10 the metadata (migration 0030): NULL keeps them, and
-- an empty array or object removes them.
WITH changed AS (
    UPDATE {schema}.jobs AS j
    SET run_at = COALESCE($2::timestamptz,
                          COALESCE($8::timestamptz, now()) + make_interval(secs => $3::float8),
                          j.run_at),
        priority = COALESCE($4::integer, j.priority),
        queue = COALESCE($5::text, j.queue),
        max_attempts = COALESCE($6::integer, j.max_attempts),
        payload = COALESCE($7::jsonb, j.payload),
        tags = CASE WHEN $9::jsonb IS NULL THEN j.tags
                    ELSE NULLIF(ARRAY(SELECT jsonb_array_elements_text($9::jsonb)), '{}') END,
        meta = CASE WHEN $10::jsonb IS NULL THEN j.meta ELSE NULLIF($10::jsonb, '{}') END,
        updated_at = COALESCE($8::timestamptz, now())
    WHERE j.id = $1 AND j.status = 'pending'
    RETURNING j.*
)
SELECT c.*, pg_notify({channel}, '* ' || c.queue) IS NULL AS notified
FROM changed AS c
