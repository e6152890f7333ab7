"""What an operator sees of the jobs: metrics, traces, per-job logs, lifecycle events.

Each is an attempt observer (``attempts.AttemptObserver``) that the executor calls
at the start and the end of every attempt, and that lives in a module of its own
here. ``observers()`` builds the ones the settings turn on; a module whose feature is
off is never imported, so a worker pays nothing, in time or memory, for what it
does not use. Metrics are the exception: they count every attempt of every job, so
they read the executor's log of ended attempts in bulk rather than observe each
(``attempt_log.AttemptLog``), and are started by the process that exports them
(``start_metrics``). Per-job logs observe attempts only to capture stdlib logging:
``ctx.log``'s capture is made with the handler's context (``joblogs``); and the
executor logs the lifecycle warnings (job.retried...) itself (``lifecycle``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobqueue import logs
from jobqueue.config import Settings
from jobqueue.db.records import JobOptions
from jobqueue.observability import trace_context
from jobqueue.observability.attempts import AttemptObserver, Outcome

if TYPE_CHECKING:
    from jobqueue.db.store import Store
    from jobqueue.observability.joblogs import JobLogs
    from jobqueue.observability.metrics import ProcessMetrics

__all__ = [
    "AttemptObserver",
    "Outcome",
    "enqueued",
    "job_logs",
    "observers",
    "start_metrics",
    "workflow_created",
]

# This process's metrics, once it exports them (start_metrics); None: it counts nothing.
_metrics: ProcessMetrics | None = None


def start_metrics(
    settings: Settings, tasks: Mapping[str, Any], *, http: bool
) -> ProcessMetrics | None:
    """The metrics of a jobqueue process, if it exports them: on its HTTP API (``http``),
    on JOBQUEUE_METRICS_PORT, or through the supervisor of ``--processes N`` (which
    hands its children PROMETHEUS_MULTIPROC_DIR). None: metrics are off here."""
    global _metrics
    exported = (
        http or settings.metrics_port is not None or os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    )
    if settings.metrics != "on" or not exported:
        return None
    if _metrics is None:
        from jobqueue.observability.metrics import ProcessMetrics

        _metrics = ProcessMetrics(settings, tasks)
    return _metrics


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
    if job_logs is not None and job_logs.stdlib:  # ctx.log alone needs no observer
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


def workflow_created(name: str | None) -> None:
    """A workflow was stored (its jobs are counted by ``enqueued``)."""
    if _metrics is not None:
        _metrics.workflow_created(name)


def enqueued(rows: Sequence[JobOptions], count: int = 1) -> None:
    """Jobs were stored: ``count`` of each of ``rows``' type and queue."""
    if _metrics is not None:
        _metrics.enqueued(rows, count)
