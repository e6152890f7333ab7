"""What an operator sees of the jobs: metrics, traces, per-job logs, lifecycle events.

Each is an attempt observer (``attempts.AttemptObserver``) that the executor calls
at the start and the end of every attempt, and that lives in a module of its own
here. ``observers()`` builds the ones the settings turn on; a module whose feature is
off is never imported, so a worker pays nothing, in time or memory, for what it
does not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobqueue import logs
from jobqueue.config import Settings
from jobqueue.observability import trace_context
from jobqueue.observability.attempts import AttemptObserver, Outcome

if TYPE_CHECKING:
    from jobqueue.db.store import Store
    from jobqueue.observability.joblogs import JobLogs

__all__ = ["AttemptObserver", "Outcome", "job_logs", "observers"]


def observers(
    settings: Settings,
    tasks: Mapping[str, Any],
    *,
    worker_id: str,
    job_logs: JobLogs | None = None,
) -> list[AttemptObserver]:
    """The attempt observers ``settings`` turn on, for worker ``worker_id`` running
    ``tasks``; ``job_logs``: its per-job log writer, if it has one."""
    found: list[AttemptObserver] = []
    # Tracing first: its span is current, and its ids bound, when the others log.
    if settings.tracing == "on" or (settings.tracing == "auto" and trace_context.imported()):
        from jobqueue.observability import tracing

        traced = tracing.observer(settings.tracing)
        if traced is not None:
            found.append(traced)
    if logs.enabled("info"):  # off, a worker pays nothing for job.started and the like
        from jobqueue.observability.lifecycle import Lifecycle

        found.append(Lifecycle(worker_id))
    if job_logs is not None:
        found.append(job_logs)
    return found


def job_logs(settings: Settings, store: Store, worker_id: str) -> JobLogs | None:
    """Worker ``worker_id``'s per-job log writer, unless JOBQUEUE_JOB_LOGS is off."""
    if settings.job_logs == "off":
        return None
    from jobqueue.observability.joblogs import JobLogs

    return JobLogs(
        store,
        worker_id,
        limit=settings.job_log_bytes,
        interval=settings.progress_interval,
        stdlib=settings.job_logs == "all",
    )
