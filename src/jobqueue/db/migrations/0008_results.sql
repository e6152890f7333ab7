-- A handler's return value (JSON, size-capped by the worker) and the progress its
-- running attempt reports: {"fraction": 0.4, "message": "...", "updated_at": "..."}.
-- Nullable without default: adding them rewrites no row.
ALTER TABLE {schema}.jobs ADD COLUMN result jsonb, ADD COLUMN progress jsonb;
