"""Prometheus metrics: what a process counts, and the /metrics it serves.

Imported only by a process that exports metrics (an HTTP API, JOBQUEUE_METRICS_PORT,
or a child of ``worker --processes N`` whose supervisor serves them): any other
process never loads prometheus-client.

The hot path is the attempt, tens of thousands a second for no-op jobs, and every
call on it shows. So metrics are not an attempt observer (its two calls per attempt,
with the executor's around them, cost more than the budget of 5% of a no-op job):
the executor appends each ended attempt to a list (``Executor.attempt_log``), and
four times a second the list is taken apart into columns, sorted and bisected into
the histograms' buckets, with C doing the per-attempt work (``AttemptLog``).
prometheus-client's own calls (a lock and a label lookup each) would cost about a
fifth of a no-op job's time. The HTTP API's /metrics adds the attempts up before
answering; a metrics port serves them a quarter of a second late at most.

With ``--processes N`` every child writes its metrics to files in the supervisor's
PROMETHEUS_MULTIPROC_DIR (prometheus-client's multiprocess mode), and the
supervisor's port serves their sum. A child's counters stay in its files after it
dies, so a restart neither resets nor doubles them; its gauges go with it.

The per-queue gauges (``jobqueue_jobs``, ``jobqueue_oldest_pending_seconds``,
``jobqueue_jobs_unhandled``, ``jobqueue_workers_heartbeating``) come from one place
only: the process that holds the maintenance lead reads them from the queue counters
(and the workers table) every leader interval;
every other process exports none. Their sum over every scraped process is the
database's count.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import os
import shutil
import tempfile
import time
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from datetime import datetime
from operator import sub
from time import monotonic
from time import time as now
from typing import Any

import asyncpg
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

from jobqueue.config import ConfigError, Settings
from jobqueue.db.query_base import Clock
from jobqueue.db.records import JobOptions, Rescued
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.model.limits import LimitsInfo, parse_rate

log = get_logger("jobqueue.metrics")

# No ``*_created`` series: a sample per labelled counter and histogram that says when
# the process started counting, which the rate functions do not need.
disable_created_metrics()  # type: ignore[no-untyped-call]

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
# The ``type`` label of a job whose type has no registered task here: the label's
# values stay the registered types, whatever clients enqueue.
OTHER = "other"
# How often the attempts are added to the metrics and the gauges sampled: more often
# holds fewer attempts in memory, for the same work in all.
FLUSH_SECONDS = 0.25
INF = math.inf
JOB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
               INF)  # fmt: skip
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                 INF)  # fmt: skip
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                300, INF)  # fmt: skip
# The ``method`` label's values; any other method a client sends is "other".
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
QUEUE_STATES = ("pending", "running", "completed", "failed", "cancelled")


class Metrics:
    """The metrics of every exporting process (``registry`` None: multiprocess mode,
    whose values are files that the exporting process reads)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        r = registry
        job = ["queue", "type"]
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


class AttemptLog:
    """The attempts a worker's executor ended since the last flush, as it adds them to
    ``entries``, six items each (queue, type, run_at, outcome, monotonic start and
    end), added to the metrics in bulk: columns sliced, mapped and sorted in C, then
    bisected per bucket."""

    def __init__(self, tasks: Mapping[str, Any]) -> None:
        self._tasks = tasks
        self.entries: list[Any] = []

    def flush(self, metrics: Metrics) -> None:
        if not self.entries:
            return
        entries = self.entries[:]
        self.entries.clear()
        columns = tuple(entries[i::FIELDS] for i in range(FIELDS))
        queues, types = columns[0], columns[1]
        n = len(queues)
        if queues.count(queues[0]) == n and types.count(types[0]) == n:  # the usual batch
            self._add(metrics, columns)
            return
        groups: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(queues, types, strict=True)):
            groups.setdefault(key, []).append(i)
        for rows in groups.values():
            self._add(metrics, tuple([column[i] for i in rows] for column in columns))

    def _add(self, metrics: Metrics, columns: tuple[Any, ...]) -> None:
        """Add the attempts of one (queue, type), as columns."""
        queues, types, run_ats, outcomes, starts, ends = columns
        queue, kind = queues[0], types[0] if types[0] in self._tasks else OTHER
        counts = collections.Counter(outcomes)
        for outcome, n in counts.items():
            if outcome == "released":
                metrics.released.labels(queue, kind).inc(n)
            else:
                metrics.finished.labels(queue, kind, outcome).inc(n)
        # A wait is its start (monotonic) plus this offset, minus its run_at (wall
        # clock): the offset is added to the bounds and the sum, not to every wait.
        offset = now() - monotonic()
        waits = sorted(map(sub, starts, map(TIMESTAMP, run_ats)))
        _observe_sorted(metrics.wait.labels(queue, kind), waits, shift=offset, clamp=True)
        if counts["released"]:  # stopped by shutdown: no run time to speak of
            ran = [i for i, outcome in enumerate(outcomes) if outcome != "released"]
            starts, ends = [starts[i] for i in ran], [ends[i] for i in ran]
        if ends:
            _observe_sorted(metrics.duration.labels(queue, kind), sorted(map(sub, ends, starts)))


TIMESTAMP = datetime.timestamp
FIELDS = 6  # of an attempt in AttemptLog.entries


def _observe_sorted(
    histogram: Histogram,
    values: list[float],
    *,
    buckets: Sequence[float] = JOB_BUCKETS,
    shift: float = 0.0,
    clamp: bool = False,
) -> None:
    """Observe each of ``values`` (sorted) plus ``shift`` in a labelled histogram of
    ``buckets``, all at once; ``clamp``: a negative one as 0 (a wait, when the clocks
    disagree). prometheus-client observes one value at a time; its bucket and sum
    values (``_buckets``, ``_sum``, files in multiprocess mode) take any amount."""
    below = 0
    for i, bound in enumerate(buckets):
        upto = bisect_right(values, bound - shift)
        if upto > below:
            histogram._buckets[i].inc(upto - below)
            below = upto
    kept = values[bisect_left(values, -shift) :] if clamp else values
    histogram._sum.inc(math.fsum(kept) + len(kept) * shift)


class ProcessMetrics:
    """This process's metrics, what feeds them, and how they are exported."""

    def __init__(self, settings: Settings, tasks: Mapping[str, Any]) -> None:
        self.settings = settings
        self._tasks = tasks
        self.registry = CollectorRegistry()
        # Under a supervisor (or any multiprocess setup), values are written to the
        # directory's files, and what is served is the sum of every process's.
        directory = os.environ.get(MULTIPROC_DIR)
        if directory:
            multiprocess.MultiProcessCollector(self.registry, path=directory)  # type: ignore[no-untyped-call]
        self._values = None if directory else self.registry
        self.metrics = Metrics(self._values)
        self.worker_metrics: WorkerMetrics | None = None
        self._attempts: list[AttemptLog] = []
        self._claims: list[float] = []  # claim statements' seconds, since the last flush
        # Workers (jobqueue.worker.Worker: not imported, which imports this package),
        # each with a store on its pool.
        self._workers: list[tuple[Any, Store]] = []
        self._pools: list[asyncpg.Pool] = []
        self._enqueued: dict[tuple[str, str], Counter] = {}
        self._queues_exported: set[str] = set()
        self._limits_exported: set[tuple[str, str]] = set()
        self._unhandled_exported: set[tuple[str, str]] = set()
        self._next_queue_read = 0.0
        self._task: asyncio.Task[None] | None = None
        # Bound now, before any worker starts: a port in use stops start-up cleanly.
        self._server = (
            None if settings.metrics_port is None else serve_port(settings, self.registry)
        )

    # -- what feeds them ---------------------------------------------------------------

    def enqueued(self, rows: Sequence[JobOptions], count: int) -> None:
        for row in rows:
            key = (row.queue, row.type if row.type in self._tasks else OTHER)
            counter = self._enqueued.get(key)
            if counter is None:
                counter = self._enqueued[key] = self.metrics.enqueued.labels(*key)
            counter.inc(count)

    def workflow_created(self, name: str | None) -> None:
        self.metrics.workflows.labels(name or "").inc()

    def watch(self, pool: asyncpg.Pool, worker: Any, clock: Clock | None) -> None:
        """Sample ``pool`` and ``worker`` (a jobqueue.worker.Worker, or None: its
        attempts, claims, slots and listener; the queue gauges while it leads), and
        add up what they counted four times a second."""
        self._pools.append(pool)
        if worker is not None:
            if self.worker_metrics is None:
                self.worker_metrics = WorkerMetrics(self._values)
            store = Store(pool, self.settings.schema, clock)
            self._workers.append((worker, store))
            attempts = AttemptLog(self._tasks)
            worker.executor.attempt_log = attempts.entries
            self._attempts.append(attempts)
            worker.producer.on_claim = self._claims.append
            worker.leader.rescuer.on_rescued = lambda jobs: self._rescued(store, jobs)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="metrics")

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
            try:
                self.sample()
                if time.monotonic() >= self._next_queue_read:
                    self._next_queue_read = time.monotonic() + self.settings.rescue_interval
                    await self._read_queues()
            except Exception as exc:  # the database is away, say: the next round tries again
                log.warning("updating the metrics failed", error=str(exc))

    def sample(self) -> None:
        """Add the attempts and claims to the metrics, and set the process gauges."""
        m = self.metrics
        for observer in self._attempts:
            observer.flush(m)
        if self.worker_metrics is not None:
            if self._claims:
                claims = sorted(self._claims)
                self._claims.clear()
                _observe_sorted(self.worker_metrics.claim, claims, buckets=CLAIM_BUCKETS)
            workers = [worker for worker, _ in self._workers]
            gauges = self.worker_metrics
            gauges.slots.labels("busy").set(sum(w.executor.running for w in workers))
            gauges.slots.labels("free").set(sum(w.executor.free_slots for w in workers))
            gauges.listener_up.set(all(w.listener.healthy for w in workers))
        open_ = sum(p.get_size() for p in self._pools)
        idle = sum(p.get_idle_size() for p in self._pools)
        m.pool.labels("busy").set(open_ - idle)
        m.pool.labels("idle").set(idle)
        m.pool_max.set(sum(p.get_max_size() for p in self._pools))

    async def _read_queues(self) -> None:
        """The queue gauges, from the counters, in the maintenance leader alone."""
        m = self.worker_metrics
        if m is None:
            return
        leading = next((store for worker, store in self._workers if worker.leader.is_leader), None)
        m.leader.set(leading is not None)
        if leading is None:
            for queue in self._queues_exported:  # a file's value outlives clear()
                for state in QUEUE_STATES:
                    m.jobs.labels(queue, state).set(0)
                m.oldest_pending.labels(queue).set(0)
            for queue, type_ in self._unhandled_exported:
                m.unhandled.labels(queue, type_).set(0)
            m.jobs.clear()
            m.oldest_pending.clear()
            m.unhandled.clear()
            m.workers.set(0)
            self._queues_exported = set()
            self._unhandled_exported = set()
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
        unhandled = capped_types(
            await leading.queue_unhandled(within_seconds=self.settings.lease_seconds)
        )
        for (queue, type_), count in unhandled.items():
            m.unhandled.labels(queue, type_).set(count)
        pairs = set(unhandled)
        for queue, type_ in self._unhandled_exported - pairs:  # a file's value outlives remove
            m.unhandled.labels(queue, type_).set(0)
        self._unhandled_exported = pairs
        self._export_limits(m, await leading.queue_limits_overview())
        m.workers.set(alive)

    def _export_limits(self, m: WorkerMetrics, limits: Mapping[str, LimitsInfo]) -> None:
        exported = set()
        for queue, info in limits.items():
            for kind, (limit, in_use, waiting) in limit_gauges(info).items():
                if limit is not None:
                    m.limit.labels(queue, kind).set(limit)
                    m.limit_in_use.labels(queue, kind).set(in_use)
                    m.limit_waiting.labels(queue, kind).set(waiting)
                    exported.add((queue, kind))
        for queue, kind in self._limits_exported - exported:  # a file's value outlives remove
            for gauge in (m.limit, m.limit_in_use, m.limit_waiting):
                gauge.labels(queue, kind).set(0)
        self._limits_exported = exported

    async def _rescued(self, store: Store, jobs: list[Rescued]) -> None:
        for job in jobs:
            kind = job.type if job.type in self._tasks else OTHER
            self.metrics.finished.labels(job.queue, kind, "rescued").inc()

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
        # The labelled children by (method, template, status): finding one by its labels
        # takes a lock and a lookup per call, on every request. As many as the labels'
        # combinations, which the routes and the status codes bound.
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

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
            method = scope["method"] if scope["method"] in HTTP_METHODS else "other"
            children = self._children.get((method, template, status))
            if children is None:
                children = self._children[(method, template, status)] = (
                    self._metrics.requests.labels(method, template, str(status)),
                    self._metrics.latency.labels(method, template),
                )
            children[0].inc()
            children[1].observe(time.perf_counter() - started)


def serve_port(settings: Settings, registry: CollectorRegistry) -> Any:
    """``GET /metrics`` on HOST:JOBQUEUE_METRICS_PORT, in a thread."""
    assert settings.metrics_port is not None
    try:
        server, _ = start_http_server(settings.metrics_port, settings.host, registry)
    except OSError as exc:  # the port is taken, say: the setting's value cannot be used
        raise ConfigError(
            f"JOBQUEUE_METRICS_PORT: cannot listen on {settings.host}:{settings.metrics_port}: "
            f"{exc.strerror}"
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


# The most types of one queue that jobqueue_jobs_unhandled names; the others are summed
# as "other". Its types come from stored jobs, which `jobqueue api` accepts of any type:
# without a cap, a client could make a series per type it invents.
UNHANDLED_TYPES_NAMED = 20


def capped_types(rows: Sequence[tuple[str, str, int]]) -> dict[tuple[str, str], int]:
    """(queue, type) -> jobs, with at most UNHANDLED_TYPES_NAMED types of each queue by
    name (those with the most jobs), the rest as ``other``."""
    by_queue: dict[str, list[tuple[int, str]]] = {}
    for queue, type_, count in rows:
        by_queue.setdefault(queue, []).append((count, type_))
    capped: dict[tuple[str, str], int] = {}
    for queue, counts in by_queue.items():
        counts.sort(key=lambda c: (-c[0], c[1]))
        for count, type_ in counts[:UNHANDLED_TYPES_NAMED]:
            capped[queue, type_] = count
        rest = sum(count for count, _ in counts[UNHANDLED_TYPES_NAMED:])
        if rest:
            capped[queue, OTHER] = capped.get((queue, OTHER), 0) + rest
    return capped


def limit_gauges(info: LimitsInfo) -> dict[str, tuple[int | None, int, int]]:
    """Each kind of limit: its value (None: not set), its use and the jobs it holds back."""
    rate = None if info.rate_limit is None else parse_rate(info.rate_limit).count
    key_rate = None if info.key_rate_limit is None else parse_rate(info.key_rate_limit).count
    return {
        "global": (info.global_limit, info.global_in_use, info.global_waiting),
        "key": (info.key_limit, info.keys_at_limit, info.key_waiting),
        "rate": (rate, info.rate_in_use, info.rate_waiting),
        "key_rate": (key_rate, 0, 0),
    }
