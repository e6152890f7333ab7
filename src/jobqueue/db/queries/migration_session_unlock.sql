-- Releases the session's migration lock of key $1; false if it held none.
SELECT pg_advisory_unlock($1)
