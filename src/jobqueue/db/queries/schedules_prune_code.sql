-- Schedules declared in code that the leader's code no longer declares: deleted.
DELETE FROM {schema}.schedules
WHERE source = 'code' AND NOT (name = ANY ($1::text[]))
RETURNING name
