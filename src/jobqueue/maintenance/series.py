"""Writes the per-minute throughput and wait of each queue (migration 0017), on the
maintenance leader, for the dashboard's charts.

Each round writes the minutes that ended at least GRACE_SECONDS ago and are not
written yet, from the jobs that finished in them (an index range of those rows only),
and forgets those older than KEEP_SECONDS. A minute is written once: a job whose
finishing transaction commits more than GRACE_SECONDS after its minute ended is left
out of the charts (it is still counted everywhere else).
"""

from __future__ import annotations

from jobqueue.db.store import Store

# Longer lets slower transactions count in their minute, and delays the chart's
# last point by as much.
GRACE_SECONDS = 5.0
# The charts show a day; one more keeps a day's chart whole across a leader's failover.
KEEP_SECONDS = 2 * 86400.0


class Series:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def run_once(self) -> int:
        """Write the minutes due; return how many rows were written."""
        written = await self._store.queue_minutes_write(grace_seconds=GRACE_SECONDS)
        await self._store.queue_minutes_prune(keep_seconds=KEEP_SECONDS)
        return written
