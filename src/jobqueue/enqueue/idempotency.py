"""Idempotency keys: a request retried with the key its first try carried gets the job
that first try stored, for JOBQUEUE_IDEMPOTENCY_TTL, whatever became of the job since.

The key is taken, the job stored and the key bound to it in one transaction: a crash
leaves either all three or none. A concurrent request with the same key waits on the
key's row until that transaction ends, then reads the job it names; so concurrent
requests store one job, and every one of them gets it (the IETF draft's 409 for a
request in flight is not needed: the flight is one transaction).

A key is its caller's (the token's name, None while the API is open), and remembers
the hash of its request: the same key with another request is refused
(IdempotencyKeyReused), as the key naming a job that retention deleted is
(IdempotentJobGone).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from jobqueue.db.pool import error_text, is_unavailable, never_sent
from jobqueue.db.store import Store
from jobqueue.model.errors import EnqueueFailed, EnqueueOutcomeUnknown
from jobqueue.model.job import Job

# Rounds of "take the key, else read it" before giving up: a key read as taken can
# expire (and be swept) before it is read, and is then free for the next round.
TAKE_ATTEMPTS = 5


@dataclass(frozen=True)
class IdempotencyKey:
    """A request's key, whose it is (None: the open API), and the request's hash."""

    key: str
    principal: str | None
    request_hash: bytes
    ttl_seconds: float


class IdempotencyKeyReused(ValueError):
    """The key was taken by a request with another body."""


class IdempotentJobGone(LookupError):
    """The key names a job that retention deleted since."""

    def __init__(self, key: str, job_id: int) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was used for job {job_id}, which has been deleted "
            "(JOBQUEUE_RETAIN_COMPLETED / JOBQUEUE_RETAIN_FAILED)"
        )
        self.job_id = job_id


async def remembered_insert(
    store: Store,
    idem: IdempotencyKey,
    insert: Callable[[Store], Awaitable[tuple[Job, bool]]],
) -> tuple[Job, bool]:
    """The job ``insert`` stores under a fresh key (True), or the job the key already
    names (False). ``store`` runs on one connection, not on a pool."""
    for _ in range(TAKE_ATTEMPTS):
        stored = await _take_and_insert(store, idem, insert)
        if stored is not None:
            return stored
        found = await store.idempotency_lookup(principal=idem.principal, key=idem.key)
        if found is None:
            continue
        if found.request_hash != idem.request_hash:
            raise IdempotencyKeyReused(
                f"Idempotency-Key {idem.key!r} was used for another request (job "
                f"{found.job_id}); use a new key for a new request"
            )
        if found.job is None:
            raise IdempotentJobGone(idem.key, found.job_id)
        return found.job, False
    raise RuntimeError(f"Idempotency-Key {idem.key!r} kept expiring; try again")


async def _take_and_insert(
    store: Store,
    idem: IdempotencyKey,
    insert: Callable[[Store], Awaitable[tuple[Job, bool]]],
) -> tuple[Job, bool] | None:
    """In one transaction: the key taken, the job stored, the key bound to it; None if
    another request holds the key. An outage before COMMIT stored nothing (EnqueueFailed;
    one before anything was sent is left to on_pool, which tries another connection);
    one during COMMIT may have stored it all (EnqueueOutcomeUnknown)."""
    transaction = store.begin()
    await transaction.start()
    try:
        stored = None
        if await store.idempotency_take(
            principal=idem.principal,
            key=idem.key,
            request_hash=idem.request_hash,
            ttl_seconds=idem.ttl_seconds,
        ):
            stored = await insert(store)
            await store.idempotency_bind(
                principal=idem.principal, key=idem.key, job_id=stored[0].id
            )
    except BaseException as exc:
        with contextlib.suppress(Exception):  # a dead connection has rolled back already
            await transaction.rollback()
        if isinstance(exc, Exception) and is_unavailable(exc) and not never_sent(exc):
            raise EnqueueFailed(f"nothing stored: {error_text(exc)}") from exc
        raise
    try:
        await transaction.commit()
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        if never_sent(exc):
            raise EnqueueFailed(f"nothing stored: {error_text(exc)}") from exc
        raise EnqueueOutcomeUnknown(
            "the connection was lost while the job was committed; it may or may not be "
            f"stored (retry with the same Idempotency-Key to be sure): {error_text(exc)}"
        ) from exc
    return stored
