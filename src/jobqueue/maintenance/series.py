"""The dashboard's per-minute series (migrations 0017, 0018), on the maintenance leader.

The counts of each minute are added as the leader folds the counter changes
(db/queries/queue_counts_fold.sql), so nothing reads the finished jobs to count them.
Each round here sets the wait percentiles of the minutes that ended at least
GRACE_SECONDS ago, from a sample of at most WAIT_SAMPLE of the jobs that finished in
each (a bounded index range), and forgets the minutes older than KEEP_SECONDS.
"""

from __future__ import annotations

from jobqueue.db.store import Store

# Longer lets slower transactions be in their minute's sample, and delays the wait
# chart's last point by as much.
GRACE_SECONDS = 5.0
# Jobs read per minute for its waits, whatever the throughput: more is a finer
# percentile (p95 of 5,000 is the 250th slowest) for more reading once a minute.
WAIT_SAMPLE = 5000
# The charts show a day; one more keeps a day's chart whole across a leader's failover.
KEEP_SECONDS = 2 * 86400.0


class Series:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def run_once(self) -> int:
        """Set the waits of the minutes due; return how many minute rows were set."""
        written = await self._store.queue_minutes_waits(
            grace_seconds=GRACE_SECONDS, sample=WAIT_SAMPLE
        )
        await self._store.queue_minutes_prune(keep_seconds=KEEP_SECONDS)
        return written
