"""Folds the queue counters' changes into their totals (see migrations 0009 and 0025).

Every statement that changes jobs' states inserts a row of changes rather than
updating a counter, so that a long transaction elsewhere cannot bloat the counters.
The readers sum those rows, so the leader folds them every round: at most BATCH per
statement, so that each holds its row locks for milliseconds, and at most
MAX_BATCHES per round, so that a backlog (no leader for a while) does not hold up
the rescuer; the next round goes on.

The changes go to two partitions in turns of five seconds. Once a round's fold has
emptied the one not taking writes, it is truncated if it is bigger than
ROTATE_PAGES: what a held xmin made it grow, a TRUNCATE gives back while jobs keep
running, where vacuum could not (the freed pages fill again as they are freed). If
the partition taking writes has grown too, the leader's next round comes once its
turn is over: rounds a multiple of two turns apart would otherwise always find it
writing.
"""

from __future__ import annotations

from jobqueue.db.store import Store
from jobqueue.maintenance.batches import in_batches

BATCH = 1000
MAX_BATCHES = 100
# Below this, a partition is left to vacuum: a TRUNCATE (a new file, a catalog row,
# the readers' plans made again) every turn would buy little. Eight pages is 64 KiB.
ROTATE_PAGES = 8
# How long after its turn a partition's late writers may still be writing to it.
LATE_SECONDS = 0.5


class Compaction:
    def __init__(self, store: Store) -> None:
        self._store = store
        # Seconds until the partition taking writes has had its turn, when it has
        # grown past ROTATE_PAGES: the leader's next round comes no later.
        self.again_in: float | None = None

    async def run_once(self) -> int:
        """Fold what is there (up to MAX_BATCHES batches), then empty the idle
        partition if it has grown; return how many rows were folded."""
        folded = await in_batches(
            lambda limit: self._store.queue_counts_fold(limit=limit),
            size=BATCH,
            max_batches=MAX_BATCHES,
        )
        turn_ends_in = await self._store.queue_counts_rotate(min_pages=ROTATE_PAGES)
        self.again_in = None if turn_ends_in is None else turn_ends_in + LATE_SECONDS
        return folded
