"""The options of a new job, named once: every way to enqueue takes these (beside its
payload and, from Python, ``conn``), and tests/unit/test_job_options.py fails when one
path lacks one. Adding an option is its column, its check in jobqueue.model.fields, and a
line here; the test then names every path that must take it."""

from __future__ import annotations

JOB_OPTIONS = (
    "queue",
    "priority",
    "max_attempts",
    "run_at",
    "delay_seconds",
    "unique_key",
    "unique_for",
    "concurrency_key",
)
# A unique key names one job: a batch's options hold for each of its jobs, so it has none.
BATCH_OPTIONS = tuple(o for o in JOB_OPTIONS if o not in ("unique_key", "unique_for"))
