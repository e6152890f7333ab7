"""What every part of the store runs on and shares: the Executor it runs queries on,
its Clock, and the helpers that bind a query's arguments. The Store (db/store.py)
inherits its parts (process_queries.py, workflow_queries.py, queue_queries.py,
admin_queries.py) from QueryBase, so that each file holds the queries of one concern
and every method still reads as the store's own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from jobqueue.db.records import (
    ClaimedJob,
    JobRow,
)
from jobqueue.db.sql import Queries


class Executor(Protocol):
    """What the store runs its queries on: asyncpg's Pool and Connection have it."""

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...
    async def fetchrow(self, query: str, *args: Any) -> Any: ...
    async def fetchval(self, query: str, *args: Any) -> Any: ...
    async def execute(self, query: str, *args: Any) -> str: ...


class Clock:
    """The time the store's queries take as "now": the database's own unless set."""

    def __init__(self) -> None:
        self._at: datetime | None = None

    def now(self) -> datetime | None:
        """The time set, or None: the database's ``now()``."""
        return self._at

    def set(self, at: datetime) -> None:
        if at.tzinfo is None:
            raise ValueError("the clock takes an aware datetime")
        self._at = at

    def advance(self, seconds: float) -> None:
        if self._at is None:
            raise RuntimeError("set the clock before advancing it")
        self._at += timedelta(seconds=seconds)

    def reset(self) -> None:
        self._at = None


class QueryBase:
    """The attributes every part of the store reads (set by Store.__init__)."""

    db: Executor
    schema: str
    clock: Clock
    _q: Queries


def _columns(rows: Sequence[JobRow]) -> list[list[Any]]:
    """Rows as the column arrays of the first seven placeholders of the queries that
    insert many (enqueue_rows.sql, workflow_insert_jobs.sql)."""
    return [
        [r.type for r in rows],
        [r.queue for r in rows],
        [r.payload for r in rows],
        [r.priority for r in rows],
        [r.max_attempts for r in rows],
        [r.run_at for r in rows],
        [r.delay_seconds for r in rows],
    ]


def _tags_and_meta(rows: Sequence[JobRow]) -> list[list[Any] | None]:
    """The rows' tags, one after another, their metadata, and where each row's tags
    begin and end among them (1-based, inclusive; None for none): an array of arrays
    must be rectangular in PostgreSQL, and a JSON array per row was parsed and unnested
    by a subquery per row. None for each array when no row has any (the common case:
    nothing to encode or send)."""
    metas = [r.meta for r in rows]
    if not any(metas):
        metas = None  # type: ignore[assignment]
    if not any(r.tags for r in rows):
        return [None, metas, None, None]
    flat: list[str] = []
    starts: list[int | None] = []
    ends: list[int | None] = []
    for r in rows:
        if r.tags:
            starts.append(len(flat) + 1)
            flat += r.tags
            ends.append(len(flat))
        else:
            starts.append(None)
            ends.append(None)
    return [flat, metas, starts, ends]


def _values(row: JobRow) -> tuple[Any, ...]:
    """A row in the order of the enqueue queries' first seven placeholders."""
    return (
        row.type, row.queue, row.payload, row.priority, row.max_attempts, row.run_at,
        row.delay_seconds,
    )  # fmt: skip


def _held(jobs: Sequence[ClaimedJob]) -> str:
    """The claims a fenced write says it holds, as the JSON object its SQL takes:
    ``{"<job id>": claim token, ...}`` (see db/queries/complete.sql for why not an
    array)."""
    return "{" + ",".join([f'"{j.id}":{_json_int(j.claim)}' for j in jobs]) + "}"


def _held_pairs(held: Sequence[tuple[int, int]]) -> str:
    """As ``_held``, from (job id, claim token) pairs: what a worker over HTTP's leases
    give, without a ClaimedJob made for each."""
    return "{" + ",".join([f'"{job_id}":{claim}' for job_id, claim in held]) + "}"


def _json_int(value: int | None) -> str:
    return "null" if value is None else str(value)


def _fenced_out(jobs: Sequence[ClaimedJob], changed: Sequence[Any]) -> list[ClaimedJob]:
    """The jobs a fenced write did not change (``changed``: the rows it returned, each
    with an ``id``): they were taken from this worker meanwhile."""
    if len(changed) == len(jobs):
        return []
    ids = {row["id"] for row in changed}
    return [job for job in jobs if job.id not in ids]


def _list(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _or_none(values: frozenset[str] | None) -> list[str] | None:
    return None if values is None else sorted(values)


def _count(status: str) -> int:
    """The rows a DELETE or UPDATE touched, from its status ("DELETE 12")."""
    return int(status.split()[-1])
