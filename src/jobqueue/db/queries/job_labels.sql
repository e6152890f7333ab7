-- The queue and type of the jobs $1, for the labels of the rescued-jobs metric (the
-- rescue itself returns neither). Jobs deleted meanwhile are missing.
SELECT id, queue, type FROM {schema}.jobs WHERE id = ANY($1::bigint[])
