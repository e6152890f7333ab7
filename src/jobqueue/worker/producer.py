"""Claims due jobs in batches (FOR UPDATE SKIP LOCKED) and hands them to the executor.

It sleeps until a NOTIFY names one of its queues, a slot frees up, or the poll
interval passes (the fallback that also finds scheduled and retried jobs).

A queue with a limit (``mail=10``) never has more than that many jobs running in
this process; the others share whatever slots are free.

Each claim of a queue resumes where the last one ended (claim.sql says why: a held
xmin would otherwise make every claim walk every job claimed since). The NOTIFYs
say when a job was queued behind that point, and the producer then looks from the
start; it also does whenever the listener is not in place, and every
FULL_SCAN_SECONDS in any case.

A queue with limits shared by every worker (jobqueue.model.limits: global_limit, key
limits, rates) is claimed by worker/limited_claim.py instead, under the queue's row
lock. Which queues have such limits is read once per poll interval, so a queue
without them never takes that lock, and one with no due job is passed over after one
probe, without it. A limited queue that had fewer jobs to give
than asked is claimed again once this worker's outcomes are written (a slot of the
limit may have been freed), rather than at the next poll.

A worker claims only the job types it has handlers for (``types``), in the claim
statement itself: a job of another type stays pending for a worker that has its
handler, rather than failing here for want of one. ``types=None`` claims every type
(``--claim-any-type``), and the executor fails what it has no handler for.

The completer may borrow free slots (``lend``) for the children that its completion
of workflow jobs releases: it claims them in the statement that completes their
parent (complete_handoff.sql), and the producer starts them (``handed``). Until then
the slots are kept from the producer's own claims, so that the two never start more
jobs than the slots.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from jobqueue.checkpoints import Signal, Signals
from jobqueue.db.pool import log_failure, resend_unsent
from jobqueue.db.records import ClaimedJob, ClaimKey
from jobqueue.db.sql import new_jobs
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.worker import limited_claim
from jobqueue.worker.completer import Handoff
from jobqueue.worker.executor import Executor

log = get_logger("jobqueue.producer")

RETRY_WAKE_MARGIN = 0.05

# A claim looks from the start at least this often, whatever the NOTIFYs said: the
# bound on how late a job made pending by a path that sends none (an operator's own
# UPDATE) starts while the queue is busy. A look from the start costs one walk over
# the dead index entries a held xmin keeps (tens of ms after minutes of one), so
# shorter bounds that lateness at the cost of more such walks.
FULL_SCAN_SECONDS = 30.0

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A claimed job's place in the claim order (its ClaimKey), compared without making one.
_CLAIM_ORDER = operator.attrgetter("priority", "run_at", "id")
_MICROSECOND = timedelta(microseconds=1)


@dataclass
class ProducerSignals(Signals):
    polled: Signal[int] = field(default_factory=Signal)  # a claim pass ended: jobs claimed
    asleep: Signal[None] = field(default_factory=Signal)  # until a wake-up or the poll
    # A NOTIFY of pending jobs arrived: its queue (None: any) and first due (None: anywhere).
    notified: Signal[tuple[str | None, int | None]] = field(default_factory=Signal)


class Producer:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        *,
        queues: Sequence[str],
        limits: Mapping[str, int] | None = None,
        worker_id: str,
        lease_seconds: float,
        poll_interval: float,
        claim_batch: int = 500,
        notified_reliably: Callable[[], bool] = lambda: False,
        types: Sequence[str] | None = None,
    ) -> None:
        """``notified_reliably``: True while every NOTIFY reaches this producer (the
        listener is in place); only then may a claim resume where the last ended.
        ``types``: the job types claimed (None: every type)."""
        self._store = store
        self._executor = executor
        self.queues = tuple(queues)
        self._limits = dict(limits or {})
        self._worker_id = worker_id
        self._lease_seconds = lease_seconds
        self._poll_interval = poll_interval
        self._claim_batch = claim_batch
        self._notified_reliably = notified_reliably
        self.types = None if types is None else tuple(types)
        # Per queue: the last claim's end, and its run_at in microseconds (as NOTIFYs say).
        self._resume: dict[str, tuple[ClaimKey, int]] = {}
        self._resets = 0  # how many NOTIFYs sent claims back to the start
        self._full_scan_at = time.monotonic()
        self._wake = asyncio.Event()
        # The listener is back: the database is, so a claim backing off tries again now.
        self._reconnected = asyncio.Event()
        self._stopping = False
        self._turn = 0
        # Queues with limits shared by every worker: whether each has a rate.
        self._limited: dict[str, bool] = {}
        self._limited_at = 0.0  # when to read them again (monotonic)
        self._limited_short = False  # a limited queue gave fewer jobs than asked
        # The last pass left due jobs behind for want of slots (all were taken, or a
        # queue was at its limit in this process): only then does a freed slot wake it.
        self._slots_short = False
        self._writes = 0  # how many times outcomes were written, for a claim to compare
        self._lent = 0  # slots the completer may fill with released children (Handoff)
        self.claims = 0  # statements run, for the stop log line
        self.claimed = 0
        self.on_claim: Callable[[float], None] = lambda seconds: None  # a claim's time
        self.signals = ProducerSignals()

    def wake(self) -> None:
        self._wake.set()

    def slot_freed(self) -> None:
        """A job ended here. Its slot matters only if the last pass was short of slots:
        a pass that found its queues empty would find them empty again (a claim that
        finds nothing was a third of an idle worker's statements per job), and new jobs
        say so by NOTIFY."""
        if self._slots_short:
            self._wake.set()

    def outcomes_written(self) -> None:
        """This worker's finished jobs were written: they no longer count against a
        shared limit, so a limited queue held back by one may start more now."""
        self._writes += 1
        if self._limited_short:
            self._wake.set()

    def notified(self, payload: str | None) -> None:
        """A NOTIFY of pending jobs (None: the listener is back, jobs of any queue may be)."""
        if payload is None:
            self._resume.clear()
            self._resets += 1
            self._wake.set()
            self._reconnected.set()
            self.signals.notified.fire((None, None))
            return
        queue, first_due = new_jobs(payload)
        self.signals.notified.fire((queue, first_due))
        if queue in self.queues:
            resume = self._resume.get(queue)
            if resume is not None and (first_due is None or first_due <= resume[1]):
                del self._resume[queue]  # queued behind where the claims resume
                self._resets += 1
            self._wake.set()

    def wake_after(self, seconds: float) -> None:
        """Wake when a retry this worker scheduled falls due, rather than at the next poll.

        The completer writes ``run_at`` a few ms after the failure; the margin makes
        the wake-up land after it.
        """
        asyncio.get_running_loop().call_later(seconds + RETRY_WAKE_MARGIN, self._wake.set)

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        backoff = 0.1
        while not self._stopping:
            self._wake.clear()  # before claiming, so a NOTIFY during the claim is kept
            if not self._free():
                self._slots_short = True  # every slot taken: the first one freed wakes us
            else:
                try:
                    before = self.claimed
                    # A connection whose backend was killed while it sat in the pool
                    # fails before sending: nothing ran, and asyncpg closed it. The pass
                    # is made again at once on another, for the slots still free.
                    more = await resend_unsent(lambda: self.claim(self._free()), self._store.pool)
                    self.signals.polled.fire(self.claimed - before)
                    if more:
                        continue  # a queue filled every slot asked: there may be more
                    backoff = 0.1
                except Exception as exc:
                    log_failure(log, exc, "claiming jobs failed", "claiming paused")
                    self._reconnected.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._reconnected.wait(), backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
            self.signals.asleep.fire(None)
            await self._sleep()

    def _free(self) -> int:
        """Jobs the next claim pass may take."""
        return min(self._executor.free_slots - self._lent, self._claim_batch)

    def lend(self) -> Handoff | None:
        """Free slots for the completer to claim the children its completions release,
        kept from the claims until ``handed``; None when it may take none. Only queues
        with no limit of this process's or of every worker's (as last read): a claim
        of those takes the row lock, or counts what runs here."""
        free = 0 if self._stopping else self._free()
        queues = tuple(q for q in self.queues if q not in self._limits and q not in self._limited)
        if free <= 0 or not queues:
            return None
        self._lent += free
        return Handoff(queues, free, self.types)

    def handed(self, lent: Handoff, jobs: Sequence[ClaimedJob]) -> None:
        """The completion that ``lent`` was for is written (or failed): start the
        children it claimed, and take back the slots."""
        self._lent -= lent.slots
        self.claimed += len(jobs)
        for job in jobs:
            self._executor.start(job)
        if len(jobs) < lent.slots and self._slots_short:
            self._wake.set()  # a pass held back by the lent slots may take them now

    async def _sleep(self) -> None:
        """Until woken, or the poll interval passes. A timer that sets the event, not
        asyncio.wait_for: that wraps the wait in a task of its own, and a wake-up would
        cost two more turns of the event loop on the path to an idle job's start."""
        timer = asyncio.get_running_loop().call_later(self._poll_interval, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            timer.cancel()

    async def claim(self, free: int) -> bool:
        """Claim up to ``free`` jobs across the queues; True if one may have more due.

        One pooled connection, taken for these passes alone: a connection kept while
        the producer sleeps would sleep with it, and one whose backend is killed
        meanwhile is handed back to the pool by asyncpg under the producer's hands.
        A pass that filled every slot it asked for is followed at once by another on
        the same connection, while slots are free: its claim is sent before the jobs
        just claimed run. Giving the connection back and taking it again are turns of
        the event loop, in which every job just started runs first, so the next claim
        would wait for them, and they for it (a fifth of a busy worker's drain). When
        the pool has no other connection to give (`jobqueue worker`'s default of one),
        the passes stop once they have claimed as many jobs as the worker has slots,
        so that the outcomes are written between them. Claimed jobs start before the
        connection goes back, so that giving it back is not on the path to their start
        either.
        """
        before = self.claimed
        pool = self._store.pool
        async with self._store.connection() as store:
            while True:
                more = await self._pass(store, free)
                free = self._free()
                if not more or free <= 0 or self._stopping:
                    return more
                spare = pool.get_idle_size() > 0 or pool.get_size() < pool.get_max_size()
                if not spare and self.claimed - before >= self._executor.slots:
                    return more

    async def _pass(self, store: Store, free: int) -> bool:
        """One claim pass over the queues, from a different one each time."""
        more = False
        if not self._notified_reliably() or time.monotonic() >= self._full_scan_at:
            self._resume.clear()
            self._full_scan_at = time.monotonic() + FULL_SCAN_SECONDS
        # Start from a different queue each time so no queue starves the others.
        self._turn = (self._turn + 1) % len(self.queues)
        if time.monotonic() >= self._limited_at:
            self._limited = await store.queue_limited(queues=self.queues)
            self._limited_at = time.monotonic() + self._poll_interval
        self._limited_short = False
        self._slots_short = False
        for queue in self.queues[self._turn :] + self.queues[: self._turn]:
            if free == 0 or self._stopping:
                self._slots_short = True
                break
            limit = self._limits.get(queue)
            running = self._executor.running_in(queue)
            wanted = free if limit is None else min(free, limit - running)
            if wanted <= 0:
                self._slots_short = True  # at its limit: a finishing job of it wakes us
                continue
            claim = self._claim_limited if queue in self._limited else self._claim_free
            jobs = await claim(store, queue, wanted)
            if jobs is None:
                continue  # nothing to start, and no claim made
            self._started(jobs)
            more = more or len(jobs) == wanted
            free -= len(jobs)
        # Slots ran out before the queues did, or may have: the next freed slot wakes us.
        self._slots_short = self._slots_short or more or free == 0
        return more

    async def _claim_free(self, store: Store, queue: str, wanted: int) -> list[ClaimedJob]:
        """A queue without shared limits: one statement, no lock, resuming where this
        worker's last claim of it ended."""
        resume_at = self._resume.get(queue)
        resets = self._resets
        started = time.perf_counter()
        jobs = await store.claim(
            queue=queue,
            limit=wanted,
            worker_id=self._worker_id,
            lease_seconds=self._lease_seconds,
            resume_at=None if resume_at is None else resume_at[0],
            types=self.types,
        )
        self.on_claim(time.perf_counter() - started)
        # A NOTIFY during the claim may have sent this queue back to the start, for a
        # job that the claim did not see: keep that.
        if jobs and resets == self._resets:
            last = max(jobs, key=_CLAIM_ORDER).key
            self._resume[queue] = (last, (last.run_at - _EPOCH) // _MICROSECOND)
        return jobs

    async def _claim_limited(
        self, store: Store, queue: str, wanted: int
    ) -> list[ClaimedJob] | None:
        """A queue with limits shared by every worker: under its row's lock
        (limited_claim.py), after a probe that takes none; None when the probe found
        no due job."""
        if not await store.limit_due(queue=queue):
            return None
        writes = self._writes
        started = time.perf_counter()
        jobs = await limited_claim.claim(
            store,
            queue=queue,
            limit=wanted,
            worker_id=self._worker_id,
            lease_seconds=self._lease_seconds,
            types=self.types,
        )
        self.on_claim(time.perf_counter() - started)
        if len(jobs) < wanted:
            self._limited_short = True
            if self._writes != writes:  # during the claim: it may not have seen them
                self._wake.set()
            if self._limited[queue]:
                await self._wake_at_rate(store, queue)
        return jobs

    async def _wake_at_rate(self, store: Store, queue: str) -> None:
        """Wake when ``queue``'s rate lets a job start again, if before the next poll."""
        seconds = await store.limit_next_start(queue=queue)
        if seconds is not None and seconds < self._poll_interval:
            asyncio.get_running_loop().call_later(max(seconds, 0.0), self._wake.set)

    def _started(self, jobs: Sequence[ClaimedJob]) -> None:
        self.claims += 1
        self.claimed += len(jobs)
        for job in jobs:
            self._executor.start(job)
