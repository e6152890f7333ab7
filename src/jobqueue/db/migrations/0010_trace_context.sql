-- The W3C trace context (traceparent, tracestate) of whoever enqueued the job, so
-- that the worker that runs it continues the trace. NULL when none was recorded:
-- adding a nullable column rewrites nothing.
ALTER TABLE {schema}.jobs ADD COLUMN trace_context jsonb;
