"""Deletes finished jobs past their retention: JOBQUEUE_RETAIN_COMPLETED for completed and
cancelled jobs, JOBQUEUE_RETAIN_FAILED for dead letters; and audit log rows past
JOBQUEUE_RETAIN_AUDIT. A workflow's jobs go together, once every one of them is past
its retention: never half a workflow (docs/workflows.md).

It runs on the maintenance leader, at most once every EVERY_SECONDS, in batches of
BATCH rows with a pause between them: each DELETE holds its row locks for
milliseconds, and autovacuum (tuned for the jobs table, see migration 0005) keeps up
with the dead rows.
"""

from __future__ import annotations

import functools
import time

from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.maintenance.batches import in_batches

log = get_logger("jobqueue.retention")

BATCH = 1000
# Workflows per statement: each goes whole, with all of its jobs.
WORKFLOW_BATCH = 10
# Between batches: other queries and autovacuum get the table back for a moment.
PAUSE_SECONDS = 0.05
# At most this many batches per run, so that a large backlog (retention just turned
# on) does not hold up the leader's other work; the next run goes on.
MAX_BATCHES = 100
# Default 5 s, the leader's round: a busy queue's deletes come as a few statements every
# few seconds, not a minute's worth at once. Once a minute, a queue finishing 500 jobs
# a second had its leader delete 30,000 a minute in a burst of seconds, and pickups in
# that burst waited for the two cores (docs/soak.md). More often costs one indexed
# probe per run when nothing is due.
EVERY_SECONDS = 5.0


class Retention:
    def __init__(
        self,
        store: Store,
        *,
        retain_completed: float | None,
        retain_failed: float | None,
        retain_audit: float | None = None,
    ) -> None:
        self._store = store
        self._rules = [
            (["completed", "cancelled"], retain_completed),
            (["failed"], retain_failed),
        ]
        self._retain_completed = retain_completed
        self._retain_failed = retain_failed
        self._retain_audit = retain_audit
        self._last_run: float | None = None

    async def run_if_due(self) -> int:
        now = time.monotonic()
        if self._last_run is not None and now - self._last_run < EVERY_SECONDS:
            return 0
        self._last_run = now
        return await self.run_once()

    async def run_once(self) -> int:
        """Delete what is past retention (up to MAX_BATCHES batches); return how many."""
        deleted = 0
        for statuses, keep in self._rules:
            if keep is not None:
                deleted += await in_batches(
                    functools.partial(self._delete, statuses=statuses, older_than_seconds=keep),
                    size=BATCH,
                    max_batches=MAX_BATCHES,
                    pause=PAUSE_SECONDS,
                )
        if deleted:
            log.info(f"Retention deleted {deleted} finished jobs", deleted=deleted)
        if self._retain_completed is not None or self._retain_failed is not None:
            workflows = await in_batches(
                self._delete_workflows, size=WORKFLOW_BATCH, max_batches=MAX_BATCHES,
                pause=PAUSE_SECONDS,
            )  # fmt: skip
            if workflows:
                log.info(f"Retention deleted {workflows} finished workflows", workflows=workflows)
        if self._retain_audit is not None:
            await self.expire_audit(self._retain_audit)
        # Unique keys whose hold has ended.
        await in_batches(
            lambda limit: self._store.unique_keys_expire(limit=limit),
            size=BATCH,
            max_batches=MAX_BATCHES,
        )
        return deleted

    async def expire_audit(self, keep: float) -> int:
        """Delete audit rows older than ``keep`` seconds; return how many."""
        expired = await in_batches(
            lambda limit: self._store.audit_expire(older_than_seconds=keep, limit=limit),
            size=BATCH,
            max_batches=MAX_BATCHES,
            pause=PAUSE_SECONDS,
        )
        if expired:
            log.info(f"Retention deleted {expired} audit log rows", deleted=expired)
        return expired

    async def _delete_workflows(self, limit: int) -> int:
        return await self._store.workflow_retention_delete(
            completed_seconds=self._retain_completed,
            failed_seconds=self._retain_failed,
            limit=limit,
        )

    async def _delete(self, limit: int, *, statuses: list[str], older_than_seconds: float) -> int:
        return await self._store.retention_delete(
            statuses=statuses, older_than_seconds=older_than_seconds, limit=limit
        )
