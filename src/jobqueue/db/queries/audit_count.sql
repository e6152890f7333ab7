-- Adds the jobs of one more batch of a bulk action to its audit row ($1), in that
-- batch's transaction: the count always matches the batches committed.
UPDATE {schema}.audit_log SET count = count + $2 WHERE id = $1
