"""The claims and fenced writes of HTTP workers (docs/http-workers.md), as
``JobQueue.http_workers`` serves them.

A claim is a Python worker's: the same statements (claim.sql, or the limited claim
under the queue's row lock), priorities, paused queues and typed claims, for the
worker id that leases.worker_id makes. It waits, when nothing is due, on the API
process's one LISTEN of new jobs (a listener started with the first waiting claim),
never a polling loop per request; a claim whose client went away while it was being
made is handed back at once, its attempt not counted. Each call renews the worker's
row, so that it shows in GET /workers while it calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from jobqueue.config import Settings
from jobqueue.db.listener import Listener
from jobqueue.db.records import (
    ClaimedJob,
    Failure,
    LogChunk,
    ParentResult,
    ProgressReport,
)
from jobqueue.db.records import Snoozed as SnoozedAttempt
from jobqueue.db.sql import new_jobs
from jobqueue.db.store import Store
from jobqueue.http_workers.leases import Lease
from jobqueue.logs import get_logger
from jobqueue.model.job import CANCELLED_WHILE_RUNNING, JobStatus
from jobqueue.observability import joblogs
from jobqueue.observability.attempts import Outcome
from jobqueue.retry import ExponentialBackoff
from jobqueue.worker import limited_claim

log = get_logger("jobqueue.api")

# Types named in the metrics by this process, at most (the rest are "other"), and the
# claimed jobs remembered for their outcomes' metrics, at most.
ANNOUNCED_TYPES = 100
CLAIMED_KEPT = 100_000

# How often a worker's row is renewed by its claims, at most: GET /workers shows its
# last call within this. And how many workers' rows and sets of queues this process
# remembers (past it, it forgets them all, and each next claim writes its row again).
ANNOUNCE_SECONDS = 1.0
REMEMBERED = 10_000

# How often a waiting claim looks for a gone client, and for due jobs when no NOTIFY
# can come (poll-only, or a job falling due at its run_at, which nothing announces).
CHECK_SECONDS = 1.0


class Source(Protocol):
    """What the service reads through: a JobQueue."""

    @property
    def settings(self) -> Settings: ...

    @property
    def direct_dsn(self) -> str | None: ...

    async def store(self) -> Store: ...


@dataclass(frozen=True, slots=True)
class ClaimOrder:
    """What a claim asks for (api/work_routes.py has checked each field)."""

    worker: str
    worker_id: str
    client: str
    queues: Sequence[str]
    types: Sequence[str] | None  # None: jobs of every type
    max: int
    wait_seconds: float
    lease_seconds: float


@dataclass(slots=True)  # one per job: a frozen one costs its fields' setattr
class Claimed:
    job: ClaimedJob
    lease: Lease
    parent_results: list[ParentResult]


@dataclass(frozen=True, slots=True)
class Renewed:
    cancel_requested: bool


class LeaseLost(Exception):
    """The write's lease no longer holds its job: rescued after the lease ran out,
    claimed again, ended, or the lease is another token's. Nothing was changed."""

    def __init__(self, job_id: int) -> None:
        super().__init__(
            f"job {job_id}: this lease no longer holds it (it ran out and the job was "
            "rescued, the job ended, or the lease is another token's); nothing changed"
        )
        self.job_id = job_id


class HttpWorkers:
    def __init__(self, source: Source) -> None:
        self._source = source
        self._listener: asyncio.Task[None] | None = None
        # Each waiting claim's wake-up, with the queues it claims from.
        self._waiting: dict[asyncio.Event, Sequence[str]] = {}
        self._stopping = False
        # For the metrics, when this process exports them (watch_http_workers): each
        # ended attempt as a Python worker's executor logs it (queue, type, run_at,
        # outcome, monotonic start and end), the jobs this process claimed, and the
        # types workers announced here (named in the metrics; at most ANNOUNCED_TYPES).
        self.attempt_log: list[Any] | None = None
        self._claimed: dict[int, tuple[str, str, datetime, float]] = {}
        self.announced_types: dict[str, None] = {}
        # Per worker id, when its row is next renewed, and the queues and types it
        # said; per set of queues, until when which are limited is known, and which.
        self._announced: dict[str, tuple[float, _Said]] = {}
        self._limited: dict[tuple[str, ...], tuple[float, Mapping[str, bool]]] = {}

    async def _store(self) -> Store:
        return await self._source.store()

    # -- claims ----------------------------------------------------------------------

    async def claim(self, order: ClaimOrder, gone: Callable[[], Awaitable[bool]]) -> list[Claimed]:
        """Up to ``order.max`` due jobs, waiting up to ``order.wait_seconds`` for one;
        none if the client went away (``gone``) before the answer."""
        store = await self._store()
        await self._announce(store, order)
        deadline = time.monotonic() + order.wait_seconds
        woken = asyncio.Event()
        self._waiting[woken] = order.queues
        try:
            while True:
                woken.clear()
                jobs = await self._claim_once(store, order)
                remaining = deadline - time.monotonic()
                if jobs or remaining <= 0 or self._stopping or await gone():
                    break
                self._listen(store)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), min(remaining, CHECK_SECONDS))
        finally:
            self._waiting.pop(woken, None)
        if jobs and self.attempt_log is not None:
            self._claimed_now(jobs, order.types)
        if await gone():
            if jobs:
                await self._handed_back(store, jobs, order.worker_id)
            log.info("claim abandoned: its client went away", worker=order.worker_id,
                     handed_back=len(jobs))  # fmt: skip
            return []
        return [
            Claimed(
                job,
                Lease(job.id, job.claim or 0, order.worker),
                []
                if job.workflow_id is None
                else await store.workflow_parent_results(job_id=job.id),
            )
            for job in jobs
        ]

    async def hand_back(self, claiming: Awaitable[list[Claimed]], worker_id: str) -> None:
        """The jobs of a claim whose answer will not be sent (the outcomes it went with
        failed), pending again at once with their attempt not counted, as for a client
        that went away; a claim that failed itself claimed nothing."""
        try:
            claimed = await claiming
        except Exception:
            return
        if not claimed:
            return
        try:
            await self._handed_back(await self._store(), [c.job for c in claimed], worker_id)
        except Exception as exc:
            # The error the request answers is the outcomes'; these jobs are rescued
            # when their leases lapse, as a lost worker's are.
            log.warning("claimed jobs not handed back; rescued when their leases lapse",
                        worker=worker_id, jobs=len(claimed), error=repr(exc))  # fmt: skip

    async def _handed_back(self, store: Store, jobs: list[ClaimedJob], worker_id: str) -> None:
        """Claimed jobs whose claim is not answered, pending again at once with the
        attempt not counted, and recorded as released."""
        await store.release(jobs=jobs, worker_id=worker_id)
        await self._ended(store, [(job.id, "released") for job in jobs])

    async def _claim_once(self, store: Store, order: ClaimOrder) -> list[ClaimedJob]:
        claimed: list[ClaimedJob] = []
        async with store.connection() as conn:
            limited = await self._limited_among(conn, order.queues)
            for queue in order.queues:
                wanted = order.max - len(claimed)
                if wanted <= 0:
                    break
                if queue in limited:
                    if not await conn.limit_due(queue=queue):
                        continue
                    jobs = await limited_claim.claim(
                        conn, queue=queue, limit=wanted, worker_id=order.worker_id,
                        lease_seconds=order.lease_seconds, types=order.types,
                    )  # fmt: skip
                else:
                    jobs = await conn.claim(
                        queue=queue, limit=wanted, worker_id=order.worker_id,
                        lease_seconds=order.lease_seconds, types=order.types,
                    )  # fmt: skip
                claimed.extend(jobs)
        return claimed

    async def _limited_among(self, store: Store, queues: Sequence[str]) -> Mapping[str, bool]:
        """Which of ``queues`` have a shared limit, as of at most a poll interval ago, as
        a Python worker's producer reads it: a claim takes no query for it."""
        key = tuple(queues)
        known = self._limited.get(key)
        if known is None or time.monotonic() >= known[0]:
            if len(self._limited) >= REMEMBERED:
                self._limited.clear()
            fresh = await store.queue_limited(queues=queues)
            known = (time.monotonic() + self._source.settings.poll_interval, fresh)
            self._limited[key] = known
        return known[1]

    async def _announce(self, store: Store, order: ClaimOrder) -> None:
        """The worker's row: the queues and types it claims, written by its first claim
        and whenever they change, and renewed at most every ANNOUNCE_SECONDS: a claim
        a worker makes as fast as it can costs no write of its row."""
        said = (tuple(order.queues), None if order.types is None else tuple(order.types))
        last = self._announced.get(order.worker_id)
        now = time.monotonic()
        if last is not None and last[1] == said and now < last[0]:
            return
        if len(self._announced) >= REMEMBERED:
            self._announced.clear()
        self._announced[order.worker_id] = (now + ANNOUNCE_SECONDS, said)
        await store.worker_register(
            worker_id=order.worker_id,
            host=order.client,
            pid=0,
            queues=order.queues,
            slots=order.max,
            types=order.types or [],
            any_type=order.types is None,
        )

    def _claimed_now(self, jobs: Sequence[ClaimedJob], types: Sequence[str] | None) -> None:
        started = time.monotonic()
        for job in jobs:
            self._claimed[job.id] = (job.queue, job.type, job.run_at, started)
        for name in types or [job.type for job in jobs]:
            if len(self.announced_types) < ANNOUNCED_TYPES:
                self.announced_types[name] = None
        while len(self._claimed) > CLAIMED_KEPT:  # outcomes that never came
            del self._claimed[next(iter(self._claimed))]

    async def _ended(self, store: Store, ended: Sequence[tuple[int, Outcome]]) -> None:
        """The attempts ended here, for the metrics: a job claimed through another
        process is read back for its queue, type and start."""
        entries = self.attempt_log
        if entries is None:
            return
        end = time.monotonic()
        for job_id, outcome in ended:
            claimed = self._claimed.pop(job_id, None)
            if claimed is None:
                job = await store.get_job(job_id=job_id)
                if job is None or job.started_at is None:
                    continue
                ran = (datetime.now(UTC) - job.started_at).total_seconds()
                claimed = (job.queue, job.type, job.run_at, end - max(ran, 0.0))
            queue, type_, run_at, started = claimed
            entries.extend((queue, type_, run_at, outcome, started, end))

    def _listen(self, store: Store) -> None:
        """The process's one LISTEN of new jobs, started by the first claim to wait."""
        if self._listener is None or self._listener.done():
            listener = Listener(self._source.direct_dsn, store.schema, store.channel, self._woken)
            self._listener = asyncio.create_task(listener.run(), name="jobqueue-http-workers")

    def _woken(self, payload: str | None) -> None:
        """A NOTIFY of new jobs (``payload`` names their queue; None: anywhere, as after
        the listener reconnected) wakes the claims waiting on that queue, and only
        them: a worker idle on another queue makes no claim for nothing."""
        queue = None if payload is None else new_jobs(payload)[0]
        for event, queues in self._waiting.items():
            if queue is None or queue in queues:
                event.set()

    def stop(self) -> None:
        """The process is stopping: waiting claims answer now (with what they have),
        so that their clients claim again from another process, and none waits from
        here on."""
        self._stopping = True
        self._woken(None)

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None

    # -- fenced writes ---------------------------------------------------------------

    async def heartbeat(
        self,
        lease: Lease,
        worker_id: str,
        lease_seconds: float,
        progress: tuple[float | None, str | None] | None = None,
    ) -> Renewed:
        """The lease renewed for ``lease_seconds``, and whether the job was asked to
        stop; ``progress`` (fraction, message) written with it, fenced alike."""
        renewed = (await self.heartbeats([(lease, worker_id)], lease_seconds))[lease]
        if renewed is None:
            raise LeaseLost(lease.job_id)
        if progress is not None:
            report = ProgressReport(lease.held(), *progress)
            await (await self._store()).progress(reports=[report], worker_id=worker_id)
        return renewed

    async def log(self, lease: Lease, worker_id: str, lines: Sequence[str]) -> bool:
        """Append ``lines`` to the attempt's log, each stamped as a Python handler's
        ``ctx.log`` line is, up to JOBQUEUE_JOB_LOG_BYTES an attempt (then a marker line
        ends it, and later lines are dropped). Returns whether the log is cut."""
        store = await self._store()
        used, truncated = await store.job_log_size(job_id=lease.job_id)
        limit = self._source.settings.job_log_bytes
        stamp = joblogs.now()
        text = "".join(f"{stamp} info {line}\n" for line in lines)
        data = text.encode()
        if truncated:
            text = ""
        elif used + len(data) > limit:
            text, truncated = joblogs.cut(data, used, limit), True
        chunk = LogChunk(lease.held(), text, truncated)
        if not await store.job_log_append(chunks=[chunk], worker_id=worker_id):
            raise LeaseLost(lease.job_id)
        return truncated

    async def release(self, lease: Lease, worker_id: str) -> str:
        """Hand the job back to its queue, pending at once, the attempt not counted: what
        a Python worker does with what it runs when it stops. Returns its status:
        ``pending``, or ``cancelled`` if it was asked to stop."""
        store = await self._store()
        if await store.release(jobs=[lease.held()], worker_id=worker_id):
            raise LeaseLost(lease.job_id)
        await self._ended(store, [(lease.job_id, "released")])
        job = await store.get_job(job_id=lease.job_id)
        return "pending" if job is None else str(job.status)

    async def heartbeats(
        self, leases: Sequence[tuple[Lease, str]], lease_seconds: float
    ) -> dict[Lease, Renewed | None]:
        """Each (lease, worker id) renewed, one statement per worker; None for a lease
        that lost its job."""
        store = await self._store()
        renewed: dict[Lease, Renewed | None] = {}
        for worker_id, group in _by_worker(leases).items():
            renewal = await store.heartbeat(
                jobs=[lease.held() for lease in group], worker_id=worker_id,
                lease_seconds=lease_seconds,
            )  # fmt: skip
            lost = {job.id for job in renewal.lost}
            asked = set(renewal.cancel_requested)
            for lease in group:
                renewed[lease] = None if lease.job_id in lost else Renewed(lease.job_id in asked)
            if len(lost) < len(group):
                await store.worker_heartbeat(worker_id=worker_id)
        return renewed

    async def complete(self, lease: Lease, worker_id: str, result: object) -> OutcomeStatus:
        """``completed``, or ``cancelled`` if the job was asked to stop meanwhile."""
        (status, _) = (await self.outcomes([Completion(lease, worker_id, result)]))[lease]
        if status is None:
            raise LeaseLost(lease.job_id)
        return status

    async def fail(self, failed: Failed) -> tuple[OutcomeStatus, float | None]:
        """The attempt failed: retried after ``retry_in_seconds`` (None: the default
        backoff from RETRY_DELAY_SECONDS) while attempts are left, else failed for good,
        as at once with ``discard``; cancelled if the job was asked to stop. Returns
        its status and the retry's delay."""
        (status, delay) = (await self.outcomes([failed]))[failed.lease]
        if status is None:
            raise LeaseLost(failed.lease.job_id)
        return status, delay

    async def snooze(self, snoozed: Snoozed) -> tuple[OutcomeStatus, float | None]:
        """The job runs again after ``seconds``, the attempt not counted (``failed``
        once snoozed JOBQUEUE_MAX_SNOOZES times; ``cancelled`` if asked to stop)."""
        (status, delay) = (await self.outcomes([snoozed]))[snoozed.lease]
        if status is None:
            raise LeaseLost(snoozed.lease.job_id)
        return status, delay

    async def outcomes(
        self, items: Sequence[Completion | Failed | Snoozed]
    ) -> dict[Lease, tuple[OutcomeStatus | None, float | None]]:
        """Each outcome applied, fenced by its lease: (its job's status, the retry's
        delay), or (None, None) where the lease lost its job and nothing changed. The
        completions go in one statement per worker (complete_leased.sql, which ends a
        job asked to stop as cancelled); a failure reads its job's attempts first, for
        its retry's delay."""
        store = await self._store()
        applied: dict[Lease, tuple[OutcomeStatus | None, float | None]] = {}
        completions = [i for i in items if isinstance(i, Completion)]
        for worker_id, group in _by_worker([(c.lease, c.worker_id) for c in completions]).items():
            results = {
                str(c.lease.job_id): c.result
                for c in completions
                if c.worker_id == worker_id and c.result is not None
            }
            ended = await store.complete_leased(
                held=[(lease.job_id, lease.claim) for lease in group], worker_id=worker_id,
                results=json.dumps(results) if results else None,
            )  # fmt: skip
            for lease in group:
                status = ended.get(lease.job_id)
                applied[lease] = (None, None) if status is None else (_ended_as(status), None)
            await self._ended(store, [(job_id, _ended_as(status))
                                      for job_id, status in ended.items()])  # fmt: skip
        for failed in (i for i in items if isinstance(i, Failed)):
            applied[failed.lease] = await self._fail(store, failed)
        for snoozed in (i for i in items if isinstance(i, Snoozed)):
            applied[snoozed.lease] = await self._snooze(store, snoozed)
        for item in items:
            if applied[item.lease] == (None, None):
                applied[item.lease] = await self._sent_again(store, item)
        return applied

    async def _sent_again(
        self, store: Store, item: Completion | Failed | Snoozed
    ) -> tuple[OutcomeStatus | None, float | None]:
        """A refused outcome may be this very claim's, applied before and sent again
        because its answer was lost: it is answered as it was applied, and changes
        nothing (the result or error first sent stays). Otherwise the lease is stale:
        (None, None). The claim's token stays on its job until the next claim, so an
        outcome of an earlier claim never matches."""
        last = await store.outcome_applied(job_id=item.lease.job_id)
        if last is None or last.claim_token != item.lease.claim:
            return None, None
        if isinstance(item, Snoozed):  # pending again with this claim's token: snoozed
            return ("pending", last.retry_in) if last.status == "pending" else (None, None)
        if isinstance(item, Completion):
            if last.status == "completed":
                return "completed", None
            if last.status == "cancelled" and last.last_error == CANCELLED_WHILE_RUNNING:
                return "cancelled", None
            return None, None
        # A failure wrote its attempt's row, as a rescue of the lapsed lease also does
        # for the same worker, but with its own error.
        if (last.attempt_worker, last.attempt_error) != (item.worker_id, item.error):
            return None, None
        if last.status == "pending":
            return "pending", last.retry_in
        if last.status == "failed":
            return "failed", None
        if last.status == "cancelled":
            return "cancelled", None
        return None, None

    async def _fail(
        self, store: Store, failed: Failed
    ) -> tuple[OutcomeStatus | None, float | None]:
        job = await store.get_job(job_id=failed.lease.job_id)
        if job is None:
            return None, None
        if failed.discard or job.attempts >= job.max_attempts:
            delay = None
        elif failed.retry_in_seconds is not None:
            delay = failed.retry_in_seconds
        else:
            settings = self._source.settings
            delay = ExponentialBackoff(settings.retry_delay, settings.retry_max_delay)(job.attempts)
        failure = Failure(failed.lease.held(), failed.error, failed.traceback, delay)
        if await store.fail(failures=[failure], worker_id=failed.worker_id):
            return None, None
        if job.cancel_requested_at is not None:  # asked to stop: fail.sql ends it so
            await self._ended(store, [(job.id, "cancelled")])
            return "cancelled", None
        attempted: Outcome = (
            "retried" if delay is not None else "discarded" if failed.discard else "failed"
        )
        await self._ended(store, [(job.id, attempted)])
        return ("failed" if delay is None else "pending"), delay

    async def _snooze(
        self, store: Store, snoozed: Snoozed
    ) -> tuple[OutcomeStatus | None, float | None]:
        refused = await store.snooze(
            snoozes=[SnoozedAttempt(snoozed.lease.held(), snoozed.seconds)],
            worker_id=snoozed.worker_id,
            max_snoozes=self._source.settings.max_snoozes,
        )
        if refused:
            return None, None
        job = await store.get_job(job_id=snoozed.lease.job_id)
        status = "pending" if job is None else job.status.value
        await self._ended(store, [(snoozed.lease.job_id, "snoozed")])
        if status == "pending":
            return "pending", snoozed.seconds
        return ("cancelled" if status == "cancelled" else "failed"), None


OutcomeStatus = Literal["completed", "pending", "failed", "cancelled"]
# The queues and the types (None: any) a worker's claim names.
_Said = tuple[tuple[str, ...], tuple[str, ...] | None]


def _ended_as(status: str) -> Literal["completed", "cancelled"]:
    """A completion's status as complete_leased.sql returns it."""
    return "cancelled" if status == JobStatus.CANCELLED else "completed"


@dataclass(slots=True)  # one per job: a frozen one costs its fields' setattr
class Completion:
    lease: Lease
    worker_id: str
    result: object


@dataclass(frozen=True, slots=True)
class Failed:
    lease: Lease
    worker_id: str
    error: str
    traceback: str | None
    retry_in_seconds: float | None
    discard: bool


def _by_worker(leases: Sequence[tuple[Lease, str]]) -> dict[str, list[Lease]]:
    grouped: dict[str, list[Lease]] = {}
    for lease, worker_id in leases:
        grouped.setdefault(worker_id, []).append(lease)
    return grouped


@dataclass(frozen=True, slots=True)
class Snoozed:
    """A worker over HTTP's snooze: run the job again after ``seconds``, uncounted."""

    lease: Lease
    worker_id: str
    seconds: float
