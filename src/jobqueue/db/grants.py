"""The privileges of the roles jobqueue's processes can run as, as GRANT statements
(``jobqueue grants``, docs/database-roles.md).

Three roles besides the schema's owner, who runs ``jobqueue migrate`` and needs none of
this: ``enqueue``, for applications that only enqueue (inside their own transactions);
``worker``, for ``jobqueue worker``; ``api``, for ``jobqueue api``. Each table a role
may touch is one line below, with the privileges its queries need: SELECT ... FOR
UPDATE needs UPDATE, INSERT ... ON CONFLICT DO UPDATE needs UPDATE too, RETURNING
needs SELECT. Triggers write the counters and key rows as the owner (migration 0016),
and keep job_labels when a job's tags or metadata change or it is deleted (0031); rows
cascade-deleted with their job are deleted by PostgreSQL as the owner: no role needs
privileges for those. The statements that insert jobs insert their job_labels rows
too, as the caller: INSERT on job_labels for every role that enqueues.
"""

from __future__ import annotations

import re
from collections.abc import Set
from typing import Literal

Purpose = Literal["enqueue", "worker", "api"]
PURPOSES: tuple[Purpose, ...] = ("enqueue", "worker", "api")

# Per purpose, table -> privileges. A table that does not exist (yet) is left out of
# what `jobqueue grants` prints, so a line may name a table of a later migration.
TABLE_PRIVILEGES: dict[Purpose, dict[str, str]] = {
    "enqueue": {
        # Workflows created in the application's transaction (jq.workflow().enqueue(conn=))
        "workflows": "SELECT, INSERT",  # RETURNING id
        "workflow_edges": "INSERT",
        "job_labels": "INSERT",  # a job's tags and metadata, for the search (migration 0031)
    },
    "worker": {
        "jobs": "SELECT, INSERT, UPDATE, DELETE",  # claims, fenced writes, retention
        "job_attempts": "SELECT, INSERT",
        "job_logs": "SELECT, INSERT, UPDATE",
        "job_steps": "SELECT, INSERT",  # durable steps (migration 0032): read, recorded
        "job_signals": "SELECT",  # what ctx.wait_for_signal takes (migration 0035)
        "workers": "SELECT, INSERT, UPDATE, DELETE",
        "leader": "SELECT, INSERT, UPDATE, DELETE",
        "queues": "SELECT, UPDATE",  # a limited queue's claims lock its row (limit_lock.sql)
        "queue_starts": "SELECT, INSERT, DELETE",  # rate-limited queues' starts
        "queue_totals": "SELECT, INSERT, UPDATE",  # the fold of counter changes
        "queue_count_changes": "SELECT, UPDATE, DELETE",
        "unique_keys": "SELECT, UPDATE, DELETE",  # forgetting expired keys
        "audit_log": "SELECT, UPDATE, DELETE",  # its retention (FOR UPDATE SKIP LOCKED)
        "idempotency_keys": "SELECT, UPDATE, DELETE",  # forgetting expired keys
        "queue_minutes": "SELECT, INSERT, UPDATE, DELETE",  # the dashboard's series, two days
        "workflows": "SELECT, UPDATE, DELETE",  # retention takes a finished one whole
        "workflow_edges": "SELECT, DELETE",  # parents' results; retention
        # The leader's ticks (FOR UPDATE SKIP LOCKED) and its code's schedules.
        "schedules": "SELECT, INSERT, UPDATE, DELETE",
        "job_labels": "INSERT",  # the tags and metadata of the jobs it inserts (ticks)
        "jobqueue_migrations": "SELECT",  # a start without migrating checks the schema
    },
    "api": {
        # enqueue, cancel, retry, edit, delete; HTTP workers' claims
        "jobs": "SELECT, INSERT, UPDATE, DELETE",
        "unique_keys": "SELECT, UPDATE",  # a deleted job's key freed (job_delete.sql)
        # Workers over HTTP (docs/http-workers.md): a failed attempt's history, their
        # log lines, their worker rows.
        "job_attempts": "SELECT, INSERT",
        "job_logs": "SELECT, INSERT, UPDATE",
        "job_steps": "SELECT",  # a job's durable steps, in GET /jobs/{id}
        "job_signals": "SELECT, INSERT",  # POST /signals (migration 0035): RETURNING id
        "workers": "SELECT, INSERT, UPDATE",
        "queues": "SELECT, INSERT, UPDATE",  # pause, resume, limits
        "queue_starts": "SELECT, INSERT, DELETE",  # rate use; HTTP workers' limited claims
        "queue_totals": "SELECT",
        "queue_count_changes": "SELECT",
        "api_tokens": "SELECT, INSERT, UPDATE",  # checked, created, revoked
        "audit_log": "SELECT, INSERT, UPDATE",  # a bulk action's count grows per batch
        "idempotency_keys": "SELECT, INSERT, UPDATE",  # taken (or an expired one retaken), bound
        "queue_minutes": "SELECT",  # the dashboard's charts
        "workflows": "SELECT, INSERT, UPDATE",  # POST /workflows; cancel reads, locks
        "workflow_edges": "SELECT, INSERT",
        "job_types": "SELECT",  # declared types, which POST /jobs accepts and checks
        "job_labels": "SELECT, INSERT",  # the search's tags and metadata (migration 0031)
        "schedules": "SELECT, INSERT, UPDATE, DELETE",  # /schedules; with API_MAINTENANCE, ticks
        "jobqueue_migrations": "SELECT",  # a start without migrating checks the schema
    },
}

# The columns the enqueue queries write; the rest are the workers'.
ENQUEUE_COLUMNS = (
    "type", "queue", "payload", "priority", "max_attempts", "run_at", "trace_context",
    "concurrency_key",
    # A workflow's jobs (migration 0019): a job with parents is inserted blocked.
    "workflow_id", "workflow_ref", "status", "parents_left", "parents_failed", "on_failure",
    "run_if",
    "tags", "meta",  # migration 0030
)  # fmt: skip

# What the enqueue role reads of jobs: SELECT on the table is for INSERT ... RETURNING,
# and this restrictive policy (on top of migration 0016's for everyone) lets only the
# rows being inserted through. RETURNING checks a new row before it is stored, when it
# has no location yet: its ctid is the invalid (4294967295,0), which no stored row has.
# (Its xmin is not set at that point, so "rows of my own transaction" cannot be told
# by xmin; and in a savepoint it would be the savepoint's.)
ENQUEUE_POLICY = (
    "CREATE POLICY {policy} ON {schema}.jobs AS RESTRICTIVE FOR SELECT TO {role} "
    "USING (ctid = '(4294967295,0)'::tid);"
)

# Migration 0016's functions (0030's enqueue_unique and enqueue_unique_replacing), run as
# the owner: enqueueing under a unique key.
FUNCTIONS = (
    "enqueue_unique(text, text, jsonb, integer, integer, timestamptz, float8, text, float8, "
    "timestamptz, jsonb, text, text[], jsonb)",
    "enqueue_unique_replacing(text, text, jsonb, integer, integer, timestamptz, float8, text, "
    "float8, timestamptz, jsonb, text, boolean, text[], jsonb)",
    "unique_holder(text)",
)
# Run as the owner too, for one purpose: the leader empties the counters' idle
# partition (migration 0025).
PURPOSE_FUNCTIONS: dict[Purpose, tuple[str, ...]] = {"worker": ("queue_counts_rotate(integer)",)}

ROLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_role(role: str) -> str:
    """``role`` if it is a plain SQL identifier; else ValueError, one line."""
    if not ROLE_NAME.match(role):
        raise ValueError(
            f"--role must be a role name of letters, digits and _ (not starting with a "
            f"digit, at most 63), got {role!r}"
        )
    return role


def statements(schema: str, role: str, purpose: Purpose, tables: Set[str]) -> list[str]:
    """The statements that give ``role`` what ``purpose`` needs in ``schema``, which holds
    ``tables``; comments name what was left out. Running them twice changes nothing."""
    to = f'"{check_role(role)}"'
    s = f'"{schema}"'
    lines = [
        f"-- {purpose} role {to} on schema {s} (jobqueue grants; see docs/database-roles.md)",
        f"GRANT USAGE ON SCHEMA {s} TO {to};",
    ]
    if purpose == "enqueue":
        inserted = ", ".join(f'"{column}"' for column in ENQUEUE_COLUMNS)
        policy = to  # one per role, named after it
        lines += [
            f"GRANT INSERT ({inserted}), SELECT ON {s}.jobs TO {to};",
            f"DROP POLICY IF EXISTS {policy} ON {s}.jobs;",
            ENQUEUE_POLICY.format(policy=policy, schema=s, role=to),
        ]
    for table, privileges in TABLE_PRIVILEGES[purpose].items():
        if table in tables:
            lines.append(f"GRANT {privileges} ON {s}.{table} TO {to};")
        else:
            lines.append(f"-- {table}: not in the schema yet; run grants again after migrating")
    lines += [
        f"GRANT EXECUTE ON FUNCTION {s}.{function} TO {to};"
        for function in (*FUNCTIONS, *PURPOSE_FUNCTIONS.get(purpose, ()))
    ]
    return lines
