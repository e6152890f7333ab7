"""The SQL of jobqueue: one file per query, loaded once, bound to a schema.

Files use four placeholders: ``{schema}``, the schema as a quoted identifier, and
``{channel}``, ``{cancel_channel}`` and ``{done_channel}``, the NOTIFY channels as
string literals. The schema name is
validated by config before it gets here, so a plain substitution is safe.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from importlib import resources


def channel_name(schema: str) -> str:
    """The NOTIFY channel that announces pending jobs; ``new_jobs`` reads its payload."""
    return f"{schema}_jobs"


def new_jobs(payload: str) -> tuple[str, int | None]:
    """The queue a pending-jobs NOTIFY names, and when its earliest job fell due, in
    microseconds since the epoch (None: anywhere). The payload is "<microseconds>
    <queue>" or "* <queue>" (migration 0011); a bare queue name is taken as "*"."""
    head, space, queue = payload.partition(" ")
    if space and head == "*":
        return queue, None
    if space and head.lstrip("-").isdigit():
        return queue, int(head)
    return payload, None


def cancel_channel_name(schema: str) -> str:
    """The NOTIFY channel that asks workers to stop a running job; its payload is the id."""
    return f"{schema}_cancel"


def done_channel_name(schema: str) -> str:
    """The NOTIFY channel that announces jobs reaching a final state (completed, failed,
    cancelled); its payload is their ids, comma-separated (at most 300 per message)."""
    return f"{schema}_done"


def bind(template: str, schema: str) -> str:
    return (
        template.replace("{schema}", f'"{schema}"')
        .replace("{channel}", f"'{channel_name(schema)}'")
        .replace("{cancel_channel}", f"'{cancel_channel_name(schema)}'")
        .replace("{done_channel}", f"'{done_channel_name(schema)}'")
    )


@functools.cache
def _template(folder: str, name: str) -> str:
    return (resources.files("jobqueue.db") / folder / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Queries:
    """Every query of the runtime, as text ready to run against one schema."""

    schema: str
    audit_count: str
    audit_expire: str
    audit_insert: str
    audit_list: str
    cancel_jobs: str
    checkpoint_save: str
    children_results: str
    children_wait: str
    claim: str
    claim_limited: str
    clock: str
    complete: str
    complete_handoff: str
    complete_leased: str
    enqueue: str
    enqueue_payloads: str
    enqueue_rows: str
    enqueue_unique: str
    enqueue_unique_replacing: str
    fail: str
    get_job: str
    heartbeat: str
    idempotency_bind: str
    idempotency_keys_expire: str
    idempotency_lookup: str
    idempotency_take: str
    job_attempts: str
    job_children: str
    job_delete: str
    job_detail: str
    job_labels_count: str
    job_log_append: str
    job_log_size: str
    job_run_now: str
    job_steps: str
    job_type_put: str
    job_type_remove: str
    job_types_list: str
    job_update: str
    jobs_changed_since: str
    jobs_count_bounded: str
    jobs_due_or_running: str
    jobs_search: str
    leader_due: str
    leader_elect: str
    leader_holder: str
    leader_resign: str
    limit_due: str
    limit_lock: str
    limit_next_start: str
    migration_invalid_index_drops: str
    migration_lock: str
    migration_lock_timeout: str
    migration_locks: str
    migration_relations: str
    migration_session_lock: str
    migration_session_unlock: str
    migrations_applied: str
    migrations_create: str
    migrations_list: str
    migrations_record: str
    outcome_applied: str
    ping: str
    plan_per_execution: str
    priority_age: str
    progress: str
    queue_counts_fold: str
    queue_counts_rotate: str
    queue_limited: str
    queue_limits_overview: str
    queue_limits_set: str
    queue_minutes_prune: str
    queue_minutes_read: str
    queue_minutes_waits: str
    queue_pause: str
    queue_resume: str
    queue_sleeping: str
    queue_unhandled: str
    queue_waiting: str
    queues_later: str
    queues_overview: str
    release: str
    rescue: str
    retention_delete: str
    retry_jobs: str
    schedule_advance: str
    schedule_delete: str
    schedule_get: str
    schedule_insert: str
    schedule_lock: str
    schedule_triggered: str
    schedule_update: str
    schedules_due: str
    schedules_list: str
    schedules_next_in: str
    schedules_prune_code: str
    schedules_sync_code: str
    schema_create: str
    schema_tables: str
    signal_hold: str
    signal_send: str
    signal_wait: str
    sleep: str
    snooze: str
    spawn_adopt: str
    step_record: str
    token_create: str
    token_revoke: str
    tokens_active_exist: str
    tokens_list: str
    unique_holder: str
    unique_keys_expire: str
    vacuum_reach: str
    wake: str
    worker_heartbeat: str
    worker_register: str
    worker_unregister: str
    workers_alive: str
    workers_jobs: str
    workers_list: str
    workers_prune: str
    workers_types: str
    workflow_adopt: str
    workflow_cancel: str
    workflow_create: str
    workflow_get: str
    workflow_insert_edges: str
    workflow_insert_jobs: str
    workflow_jobs: str
    workflow_list: str
    workflow_parent_results: str
    workflow_retention_delete: str

    @property
    def channel(self) -> str:
        return channel_name(self.schema)

    @property
    def cancel_channel(self) -> str:
        return cancel_channel_name(self.schema)

    @property
    def done_channel(self) -> str:
        return done_channel_name(self.schema)


QUERY_NAMES = tuple(f.name for f in dataclasses.fields(Queries) if f.name != "schema")


@functools.cache
def queries(schema: str) -> Queries:
    texts = {name: bind(_template("queries", f"{name}.sql"), schema) for name in QUERY_NAMES}
    return Queries(schema=schema, **texts)


# The first line of a migration that runs outside a transaction, one statement at a
# time: what CREATE INDEX CONCURRENTLY needs (docs/migrations.md).
NO_TRANSACTION = "-- jobqueue:no-transaction"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def transactional(self) -> bool:
        return not self.sql.startswith(NO_TRANSACTION)

    @property
    def statements(self) -> list[str]:
        """Its statements, in order (split_statements). A migration outside a
        transaction runs them one by one, and each must be safe to run again (IF NOT
        EXISTS), as a migrator that died may have run some of them."""
        return split_statements(self.sql)


# What a script's semicolons hide in: a comment, a quoted string or identifier, or the
# opening of a dollar-quoted body (a function's), which runs to its closing tag.
_HIDES = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$\w*\$|;", re.S)


def split_statements(sql: str) -> list[str]:
    """A script's statements, in order, each without its semicolon and the comments
    before it."""
    found, start, at = [], 0, 0
    while match := _HIDES.search(sql, at):
        token, at = match.group(0), match.end()
        if token == ";":
            found.append(sql[start : match.start()])
            start = at
        elif token.startswith("$"):
            close = sql.find(token, at)
            at = len(sql) if close < 0 else close + len(token)
    found.append(sql[start:])
    statements = []
    for text in found:
        lines = text.strip().splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
            lines.pop(0)
        if lines:
            statements.append("\n".join(lines).strip())
    return statements


@functools.cache
def migrations(schema: str) -> tuple[Migration, ...]:
    """Numbered migration files (``0001_init.sql``...), in order, bound to ``schema``."""
    folder = resources.files("jobqueue.db") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version, _, rest = entry.name.partition("_")
            found.append(
                Migration(int(version), rest.removesuffix(".sql"), bind(entry.read_text(), schema))
            )
    return tuple(sorted(found, key=lambda m: m.version))
