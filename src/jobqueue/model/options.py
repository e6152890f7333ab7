"""The options of a new job, declared once: every way to enqueue from Python takes them
as ``**options: Unpack[EnqueueOptions]`` (a batch, ``BatchOptions``), beside its payload
and ``conn``; the HTTP schema and the CLI name the same fields, and
tests/unit/test_job_options.py fails when a path lacks one. Adding an option is its
column, its check in jobqueue.model.fields, and a line here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime


class BatchOptions(TypedDict, total=False):
    """What every job of a batch shares: all options but a unique key, which names one
    job. None, or an option left out, is the task's default, else the settings'."""

    queue: str | None
    priority: int | None  # higher runs first
    max_attempts: int | None
    run_at: datetime | None  # with a time zone; or:
    delay_seconds: float | None
    concurrency_key: str | None  # else its task's payload field gives it (docs/limits.md)
    tags: Sequence[str] | None  # at most 16, of at most 64 characters (docs/search.md)
    meta: Mapping[str, Any] | None  # a JSON object of at most 8 KiB (docs/search.md)


class EnqueueOptions(BatchOptions, total=False):
    """A job's options: a batch's, and a unique key, held by one pending or running job
    (or one completed within ``unique_for`` seconds) at a time."""

    unique_key: str | None
    unique_for: float | None
    # When the key is held by a pending job: "return" it (default), "replace" its
    # payload, priority and run time, or "debounce" it (docs/unique-jobs.md).
    on_conflict: str | None


class ManyOptions(BatchOptions, total=False):
    """``enqueue_many``'s options: a batch's, and a unique key per payload (None: that
    job has none), the keyed jobs sharing ``unique_for`` and ``on_conflict``."""

    unique_keys: Sequence[str | None] | None
    unique_for: float | None
    on_conflict: str | None


JOB_OPTIONS: tuple[str, ...] = tuple(EnqueueOptions.__annotations__)
BATCH_OPTIONS: tuple[str, ...] = tuple(BatchOptions.__annotations__)
