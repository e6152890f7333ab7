-- Deletes a schedule; its jobs stay.
DELETE FROM {schema}.schedules WHERE name = $1 RETURNING name
