"""Forgets idempotency keys past JOBQUEUE_IDEMPOTENCY_TTL, on the maintenance leader.

Every round, in batches: an expired key no longer answers (the queries compare its
expiry with now), so this only keeps the table to the keys of the last TTL. Each
batch is one DELETE by the expiry index; with nothing expired it is one index probe.
"""

from __future__ import annotations

from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.maintenance.batches import in_batches

log = get_logger("jobqueue.idempotency")

BATCH = 1000
# A large backlog (the leader was down for a day) is cleared over several rounds, so
# that it does not hold up the leader's other work.
MAX_BATCHES = 20


class IdempotencyExpiry:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def run_once(self) -> int:
        """Delete expired keys (up to MAX_BATCHES batches); return how many."""
        deleted = await in_batches(
            lambda limit: self._store.idempotency_keys_expire(limit=limit),
            size=BATCH,
            max_batches=MAX_BATCHES,
        )
        if deleted:
            log.debug(f"Forgot {deleted} expired idempotency keys", deleted=deleted)
        return deleted
