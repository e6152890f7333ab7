"""Folds the queue counters' changes into their totals (see migration 0009).

Every statement that changes jobs' states inserts a row of changes rather than
updating a counter, so that a long transaction elsewhere cannot bloat the counters.
The readers sum those rows, so the leader folds them every round: at most BATCH per
statement, so that each holds its row locks for milliseconds, and at most
MAX_BATCHES per round, so that a backlog (no leader for a while) does not hold up
the rescuer; the next round goes on.
"""

from __future__ import annotations

from jobqueue.db.store import Store
from jobqueue.maintenance.batches import in_batches

BATCH = 1000
MAX_BATCHES = 100


class Compaction:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def run_once(self) -> int:
        """Fold what is there (up to MAX_BATCHES batches); return how many rows."""
        return await in_batches(
            lambda limit: self._store.queue_counts_fold(limit=limit),
            size=BATCH,
            max_batches=MAX_BATCHES,
        )
