"""Prometheus metrics: what a process counts, and the /metrics it serves.

Imported only by a process that exports metrics (an HTTP API, JOBQUEUE_METRICS_PORT,
or a child of ``worker --processes N`` whose supervisor serves them): any other
process never loads prometheus-client.

The hot path is the attempt. An attempt adds to plain per-(queue, type) tallies, a
few list and dict operations; the tallies are added to the Prometheus metrics once a
second and before every scrape of the HTTP API. prometheus-client's own calls
(a lock and a label lookup each) would cost about a fifth of a no-op job's time at
tens of thousands of jobs a second.

With ``--processes N`` every child writes its metrics to files in the supervisor's
PROMETHEUS_MULTIPROC_DIR (prometheus-client's multiprocess mode), and the
supervisor's port serves their sum. A child's counters stay in its files after it
dies, so a restart neither resets nor doubles them; its gauges go with it.

The per-queue gauges (``jobqueue_jobs``, ``jobqueue_oldest_pending_seconds``,
``jobqueue_workers_heartbeating``) come from one place only: the process that holds
the maintenance lead reads them from the queue counters every leader interval;
every other process exports none. Their sum over every scraped process is the
database's count.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import tempfile
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from time import time as now
from typing import TYPE_CHECKING, Any, get_args

import asyncpg
import structlog
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
    start_http_server,
)

from jobqueue.config import Settings
from jobqueue.db.records import ClaimedJob, JobOptions, Rescued
from jobqueue.db.store import Clock, Store
from jobqueue.observability.attempts import Outcome

if TYPE_CHECKING:
    from jobqueue.worker import Worker

log = structlog.get_logger("jobqueue.metrics")

# No ``*_created`` series: a sample per labelled counter and histogram that says when
# the process started counting, which the rate functions do not need.
disable_created_metrics()  # type: ignore[no-untyped-call]

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
# The ``type`` label of a job whose type has no registered task here: the label's
# values stay the registered types, whatever clients enqueue.
OTHER = "other"
# How often the tallies are added to the metrics and the gauges sampled.
FLUSH_SECONDS = 1.0
# Keys (queue, job type) the attempt tallies remember; past it, the jobs of a new
# unregistered type are found the slow way (their type's count is unbounded, not ours).
MAX_TALLIES = 1000
INF = math.inf
JOB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
               INF)  # fmt: skip
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                 INF)  # fmt: skip
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                300, INF)  # fmt: skip
QUEUE_STATES = ("pending", "running", "completed", "failed", "cancelled")
OUTCOMES: tuple[Outcome | str, ...] = (
    "completed", "retried", "failed", "cancelled", "discarded", "rescued",
)  # fmt: skip


class Metrics:
    """Every metric of a process (``registry`` None: multiprocess mode, whose values
    are the files the supervisor reads)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        r = registry
        job = ["queue", "type"]
        self.enqueued = Counter(
            "jobqueue_jobs_enqueued", "Jobs stored by this process.", job, registry=r
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


class _Tally:
    """One (queue, type)'s attempts since the last flush: outcome counts, and bucket
    counts (not cumulative) and sums of durations and waits."""

    __slots__ = ("duration_sum", "durations", "labels", "outcomes", "wait_sum", "waits")

    def __init__(self, queue: str, type: str) -> None:
        self.labels = (queue, type)
        self.outcomes: dict[str, int] = dict.fromkeys(get_args(Outcome), 0)
        self.durations = [0] * len(JOB_BUCKETS)
        self.duration_sum = 0.0
        self.waits = [0] * len(JOB_BUCKETS)
        self.wait_sum = 0.0


class AttemptMetrics:
    """The attempt observer: counts outcomes, observes waits and durations."""

    def __init__(self, tasks: Mapping[str, Any]) -> None:
        self._tasks = tasks
        # By the job's own (queue, type); the jobs of unregistered types share their
        # queue's "other" tally, found through the same dict up to MAX_TALLIES keys.
        self._tallies: dict[tuple[str, str], _Tally] = {}
        self._others: dict[str, _Tally] = {}

    def started(self, job: ClaimedJob) -> object:
        # The hot path: one dict lookup, two clock reads, one bisect.
        tally = self._tallies.get((job.queue, job.type)) or self._tally(job)
        wait = now() - job.run_at.timestamp()
        if wait < 0.0:  # the database's clock is ahead of ours
            wait = 0.0
        tally.waits[bisect_left(JOB_BUCKETS, wait)] += 1
        tally.wait_sum += wait
        return tally

    def _tally(self, job: ClaimedJob) -> _Tally:
        if job.type in self._tasks:
            tally = _Tally(job.queue, job.type)
        else:
            tally = self._others.get(job.queue) or _Tally(job.queue, OTHER)
            self._others[job.queue] = tally
        if len(self._tallies) < MAX_TALLIES:
            self._tallies[job.queue, job.type] = tally
        return tally

    def ended(
        self,
        job: ClaimedJob,
        state: object,
        outcome: Outcome,
        seconds: float,
        error: BaseException | None,
    ) -> None:
        tally: _Tally = state  # type: ignore[assignment]  # what started returned
        tally.outcomes[outcome] += 1
        if outcome != "released":
            tally.durations[bisect_left(JOB_BUCKETS, seconds)] += 1
            tally.duration_sum += seconds

    def flush(self, metrics: Metrics) -> None:
        """Add the tallies to ``metrics`` and start them again from zero."""
        for tally in {*self._tallies.values(), *self._others.values()}:
            queue, kind = tally.labels
            outcomes = tally.outcomes
            for outcome, n in outcomes.items():
                if not n:
                    continue
                if outcome == "released":
                    metrics.released.labels(queue, kind).inc(n)
                else:
                    metrics.finished.labels(queue, kind, outcome).inc(n)
                outcomes[outcome] = 0
            _observe_many(metrics.wait, tally.labels, tally.waits, tally.wait_sum)
            tally.wait_sum = 0.0
            _observe_many(metrics.duration, tally.labels, tally.durations, tally.duration_sum)
            tally.duration_sum = 0.0


def _observe_many(
    family: Histogram, labels: tuple[str, str], counts: list[int], total: float
) -> None:
    """Add ``counts`` observations per bucket, summing to ``total``, to the histogram
    of ``labels``, then zero ``counts``. prometheus-client observes one value at a
    time; its bucket and sum values (``_buckets``, ``_sum``, files in multiprocess
    mode) take any amount."""
    if not any(counts):
        return
    histogram = family.labels(*labels)
    for i, n in enumerate(counts):
        if n:
            histogram._buckets[i].inc(n)
            counts[i] = 0
    histogram._sum.inc(total)


class ProcessMetrics:
    """This process's metrics, what feeds them, and how they are exported."""

    def __init__(self, settings: Settings, tasks: Mapping[str, Any]) -> None:
        self.settings = settings
        self._tasks = tasks
        self._supervised = bool(os.environ.get(MULTIPROC_DIR))
        self.registry = CollectorRegistry()
        self.metrics = Metrics(None if self._supervised else self.registry)
        self._attempts: list[AttemptMetrics] = []
        self._workers: list[tuple[Worker, Store]] = []
        self._pools: list[asyncpg.Pool] = []
        self._enqueued: dict[tuple[str, str], Counter] = {}
        self._queues_exported: set[str] = set()
        self._next_queue_read = 0.0
        self._task: asyncio.Task[None] | None = None
        self._server: Any = None

    # -- what feeds them ---------------------------------------------------------------

    def attempts(self, tasks: Mapping[str, Any]) -> AttemptMetrics:
        observer = AttemptMetrics(tasks)
        self._attempts.append(observer)
        return observer

    def enqueued(self, rows: Sequence[JobOptions], count: int) -> None:
        for row in rows:
            key = (row.queue, row.type if row.type in self._tasks else OTHER)
            counter = self._enqueued.get(key)
            if counter is None:
                counter = self._enqueued[key] = self.metrics.enqueued.labels(*key)
            counter.inc(count)

    def watch(self, pool: asyncpg.Pool, worker: Worker | None, clock: Clock | None) -> None:
        """Sample ``pool`` and ``worker`` (its slots, listener and claims; the queue
        gauges while it leads), flush every second, and serve JOBQUEUE_METRICS_PORT."""
        self._pools.append(pool)
        if worker is not None:
            store = Store(pool, self.settings.schema, clock)
            self._workers.append((worker, store))
            worker.producer.on_claim = self.metrics.claim.observe
            worker.leader.rescuer.on_rescued = lambda jobs: self._rescued(store, jobs)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="metrics")
        if self.settings.metrics_port is not None and self._server is None:
            self._server = serve_port(self.settings, self.registry)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self.sample()  # the last outcomes, into the files of a supervised process
        if self._server is not None:
            self._server.shutdown()
            self._server = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            self.sample()
            if time.monotonic() >= self._next_queue_read:
                self._next_queue_read = time.monotonic() + self.settings.rescue_interval
                try:
                    await self._read_queues()
                except Exception as exc:  # the next round tries again
                    log.warning("reading the queue gauges failed", error=str(exc))

    def sample(self) -> None:
        """Add the attempt tallies to the metrics, and set the process gauges."""
        m = self.metrics
        for observer in self._attempts:
            observer.flush(m)
        busy = free = 0
        for worker, _ in self._workers:
            busy += worker.executor.running
            free += worker.executor.free_slots
        if self._workers:
            m.slots.labels("busy").set(busy)
            m.slots.labels("free").set(free)
            m.listener_up.set(all(w.listener.healthy for w, _ in self._workers))
        open_ = sum(p.get_size() for p in self._pools)
        idle = sum(p.get_idle_size() for p in self._pools)
        m.pool.labels("busy").set(open_ - idle)
        m.pool.labels("idle").set(idle)
        m.pool_max.set(sum(p.get_max_size() for p in self._pools))

    async def _read_queues(self) -> None:
        """The queue gauges, from the counters, in the maintenance leader alone."""
        m = self.metrics
        leading = next((store for worker, store in self._workers if worker.leader.is_leader), None)
        m.leader.set(leading is not None)
        if leading is None:
            for queue in self._queues_exported:  # a file's value outlives clear()
                for state in QUEUE_STATES:
                    m.jobs.labels(queue, state).set(0)
                m.oldest_pending.labels(queue).set(0)
            m.jobs.clear()
            m.oldest_pending.clear()
            m.workers.set(0)
            self._queues_exported = set()
            return
        queues = await leading.queues_overview()
        alive = await leading.workers_alive(within_seconds=self.settings.lease_seconds)
        for q in queues:
            for state in QUEUE_STATES:
                m.jobs.labels(q.name, state).set(getattr(q, state))
            m.oldest_pending.labels(q.name).set(q.oldest_pending_seconds or 0.0)
        for gone in self._queues_exported - {q.name for q in queues}:
            for state in QUEUE_STATES:
                m.jobs.labels(gone, state).set(0)
            m.oldest_pending.labels(gone).set(0)
        self._queues_exported = {q.name for q in queues}
        m.workers.set(alive)

    async def _rescued(self, store: Store, jobs: list[Rescued]) -> None:
        try:
            labels = await store.job_labels(job_ids=[j.id for j in jobs])
        except Exception as exc:  # counted as "other" rather than not at all
            log.warning("reading the rescued jobs' labels failed", error=str(exc))
            labels = {}
        for job in jobs:
            queue, kind = labels.get(job.id, (OTHER, OTHER))
            kind = kind if kind in self._tasks else OTHER
            self.metrics.finished.labels(queue, kind, "rescued").inc()

    # -- how they are exported ---------------------------------------------------------

    def exposition(self) -> tuple[bytes, str]:
        """The scrape of the HTTP API: up to date, and its content type."""
        self.sample()
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class RequestMetrics:
    """Pure ASGI middleware: requests by method, route template and status, and their
    latency. The route is the template (``/jobs/{job_id}``), never a path with an id."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self._metrics = metrics

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client gets when the app raises before answering

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope["method"]
            self._metrics.requests.labels(method, template, str(status)).inc()
            self._metrics.latency.labels(method, template).observe(time.perf_counter() - started)


def serve_port(settings: Settings, registry: CollectorRegistry) -> Any:
    """``GET /metrics`` on JOBQUEUE_HOST:JOBQUEUE_METRICS_PORT, in a thread."""
    from jobqueue.server import StartupError

    assert settings.metrics_port is not None
    try:
        server, _ = start_http_server(settings.metrics_port, settings.host, registry)
    except OSError as exc:
        raise StartupError(
            f"cannot listen on {settings.host}:{settings.metrics_port} for metrics: {exc.strerror}"
        ) from exc
    log.info(f"Serving metrics on http://{settings.host}:{server.server_port}/metrics")
    return server


class ChildrenMetrics:
    """``worker --processes N --metrics-port P``: the children write their metrics to
    files in a directory of the supervisor's, and the supervisor's port serves their
    sum (prometheus-client's multiprocess mode)."""

    def __init__(self, settings: Settings) -> None:
        self.directory = tempfile.mkdtemp(prefix="jobqueue-metrics-")
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.directory)  # type: ignore[no-untyped-call]
        try:
            self._server = serve_port(settings, registry)
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """A child's variables: it writes into the directory and serves no port."""
        return {**env, MULTIPROC_DIR: self.directory, "JOBQUEUE_METRICS_PORT": ""}

    def exited(self, pid: int) -> None:
        """A child ended: its gauges go (its counters and histograms stay)."""
        multiprocess.mark_process_dead(pid, self.directory)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._server.shutdown()
        shutil.rmtree(self.directory, ignore_errors=True)
