"""The metric families jobqueue exports: their names, help, labels and buckets.

Two sets, so that a process exports only what it has: ``Metrics``, of every exporting
process (enqueues, attempts' outcomes and times, its pool, its HTTP requests), and
``WorkerMetrics``, of a process that runs workers (claims, slots, the listener, and the
gauges read by the maintenance leader). Created on a registry of the process's, or
with none in multiprocess mode (jobqueue.observability.metrics says when).
"""

from __future__ import annotations

import math

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

# No ``*_created`` series: a sample per labelled counter and histogram that says when
# the process started counting, which the rate functions do not need.
disable_created_metrics()  # type: ignore[no-untyped-call]

# The ``type`` label of a job whose type has no registered task here: the label's
# values stay the registered types, whatever clients enqueue.
OTHER = "other"
INF = math.inf
JOB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
               INF)  # fmt: skip
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                 INF)  # fmt: skip
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                300, INF)  # fmt: skip


class Metrics:
    """The metrics of every exporting process (``registry`` None: multiprocess mode,
    whose values are files that the exporting process reads)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        r = registry
        job = ["queue", "type"]
        # 1, labelled with the release and the schema its code needs: which release a
        # fleet runs, in the middle of an upgrade too (max: one per version, not a sum).
        self.build_info = Gauge(
            "jobqueue_build_info",
            "This process's release (version) and the last migration its code needs "
            "(schema); always 1.",
            ["version", "schema"],
            multiprocess_mode="max",
            registry=r,
        )
        self.enqueued = Counter(
            "jobqueue_jobs_enqueued", "Jobs stored by this process.", job, registry=r
        )
        self.workflows = Counter(
            "jobqueue_workflows_created",
            "Workflows stored by this process, by name (empty when unnamed).",
            ["workflow"],
            registry=r,
        )
        self.finished = Counter(
            "jobqueue_jobs_finished",
            "Attempts ended, by outcome: completed, retried, failed, cancelled, discarded, "
            "or rescued (its worker was lost; counted by the maintenance leader).",
            [*job, "outcome"],
            registry=r,
        )
        self.released = Counter(
            "jobqueue_jobs_released",
            "Attempts stopped by shutdown and handed back uncounted (not a finish).",
            job,
            registry=r,
        )
        self.duration = Histogram(
            "jobqueue_job_duration_seconds",
            "Handler run time of an attempt.",
            job,
            buckets=JOB_BUCKETS,
            registry=r,
        )
        self.wait = Histogram(
            "jobqueue_job_wait_seconds",
            "Time from a job's run_at (when it fell due) to its attempt's start.",
            job,
            buckets=JOB_BUCKETS,
            registry=r,
        )
        self.pool = Gauge(
            "jobqueue_pool_connections",
            "Connections of this process's pool: busy (lent out) or idle.",
            ["state"],
            multiprocess_mode="livesum",
            registry=r,
        )
        self.pool_max = Gauge(
            "jobqueue_pool_max_connections",
            "Most connections this process's pool opens.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.requests = Counter(
            "jobqueue_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "jobqueue_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template.",
            ["method", "route"],
            buckets=HTTP_BUCKETS,
            registry=r,
        )


class WorkerMetrics:
    """The metrics of a process that runs workers: an API-only process has none of
    them (an unlabelled gauge is always exported, and a listener that does not exist
    is not down)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        r = registry
        self.claim = Histogram(
            "jobqueue_claim_seconds",
            "Time of one claim statement.",
            buckets=CLAIM_BUCKETS,
            registry=r,
        )
        self.jobs = Gauge(
            "jobqueue_jobs",
            "Jobs by queue and state, from the queue counters; exported by the "
            "maintenance leader only, so the sum over all processes is the true count.",
            ["queue", "state"],
            multiprocess_mode="livesum",
            registry=r,
        )
        self.oldest_pending = Gauge(
            "jobqueue_oldest_pending_seconds",
            "How long the longest-waiting due job of the queue has waited (0: none); "
            "exported by the maintenance leader only.",
            ["queue"],
            multiprocess_mode="livemax",
            registry=r,
        )
        self.unhandled = Gauge(
            "jobqueue_jobs_unhandled",
            "Pending jobs that wait for a handler: of a type that no live worker serving "
            "the queue has a handler for; exported by the maintenance leader only.",
            ["queue", "type"],
            multiprocess_mode="livesum",
            registry=r,
        )
        # A queue's limits shared by every worker (docs/limits.md), by kind: global,
        # key, rate, key_rate. "In use": running jobs (global), keys at their limit
        # (key), starts in the period that ends now (rate).
        self.limit = Gauge(
            "jobqueue_queue_limit",
            "A queue's limit shared by every worker (a rate: its count per period); "
            "exported by the maintenance leader only.",
            ["queue", "limit"],
            multiprocess_mode="livemax",
            registry=r,
        )
        self.limit_in_use = Gauge(
            "jobqueue_queue_limit_in_use",
            "How much of the limit is in use: running jobs (global), keys at their limit "
            "(key), starts within the period (rate); exported by the maintenance leader only.",
            ["queue", "limit"],
            multiprocess_mode="livemax",
            registry=r,
        )
        self.limit_waiting = Gauge(
            "jobqueue_queue_limit_waiting",
            "Due jobs that wait only because of the limit; exported by the maintenance "
            "leader only.",
            ["queue", "limit"],
            multiprocess_mode="livemax",
            registry=r,
        )
        self.workers = Gauge(
            "jobqueue_workers_heartbeating",
            "Worker processes whose heartbeat is at most a lease old; exported by the "
            "maintenance leader only.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.leader = Gauge(
            "jobqueue_maintenance_leader",
            "1 in the process that holds the maintenance lead.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.slots = Gauge(
            "jobqueue_worker_slots",
            "Job slots (WORKER_COUNT) of this process's workers: busy or free.",
            ["state"],
            multiprocess_mode="livesum",
            registry=r,
        )
        self.listener_up = Gauge(
            "jobqueue_listener_up",
            "1 while the worker's LISTEN connection is up (0: woken by polling only); "
            "with --processes, the least of the processes.",
            multiprocess_mode="livemin",
            registry=r,
        )
