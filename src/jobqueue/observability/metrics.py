"""Prometheus metrics: what feeds a process's metrics, and the /metrics it serves.

Imported only by a process that exports metrics (an HTTP API, JOBQUEUE_METRICS_PORT,
or a child of ``worker --processes N`` whose supervisor serves them): any other
process never loads prometheus-client. The families themselves are in
``metric_definitions``, and the bulk adding-up of ended attempts in ``attempt_log``;
both are imported through this module only.

The attempts are added up four times a second (``FLUSH_SECONDS``). The HTTP API's
/metrics adds them up before answering; a metrics port serves them a quarter of a
second late at most.

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
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import Any

import asyncpg
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    generate_latest,
    multiprocess,
    start_http_server,
)

from jobqueue import release
from jobqueue.config import ConfigError, Settings
from jobqueue.db.migrate import code_version
from jobqueue.db.query_base import Clock
from jobqueue.db.records import JobOptions, Rescued
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.model.limits import LimitsInfo, parse_rate
from jobqueue.observability.attempt_log import AttemptLog, observe_sorted
from jobqueue.observability.metric_definitions import (
    CLAIM_BUCKETS,
    OTHER,
    Metrics,
    WorkerMetrics,
)

log = get_logger("jobqueue.metrics")

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
# How often the attempts are added to the metrics and the gauges sampled: more often
# holds fewer attempts in memory, for the same work in all.
FLUSH_SECONDS = 0.25
# The ``method`` label's values; any other method a client sends is "other".
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
QUEUE_STATES = ("pending", "running", "completed", "failed", "cancelled", "waiting")


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
        self.metrics.build_info.labels(release.version(), str(code_version())).set(1)
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

    def watch_http_workers(self, http_workers: Any) -> None:
        """Count the attempts HTTP workers end through this process
        (jobqueue.http_workers.service.HttpWorkers: not imported, which imports the
        worker) as a worker's executor's are, their types named as they announce them."""
        attempts = AttemptLog(http_workers.announced_types)
        http_workers.attempt_log = attempts.entries
        self._attempts.append(attempts)
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
                observe_sorted(self.worker_metrics.claim, claims, buckets=CLAIM_BUCKETS)
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
