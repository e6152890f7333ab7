"""Job edits: a job that has not started changed, made due now, or deleted (PATCH and
DELETE /jobs/{id}, POST /jobs/{id}/run-now; ``jq.update_job``, ``jq.delete_job``,
``jq.run_now``). Given who acts (``by``), each writes its audit row in its own
transaction (jobqueue.audit), refusals included.

Each is one statement guarded by the job's state, so a worker's claim and an edit
are ordered by the row's lock: a job claimed between a read and the edit is refused
(JobStateError, a 409), never half changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobqueue import audit
from jobqueue.audit import Action, Actor
from jobqueue.control import refusal
from jobqueue.db.store import Store
from jobqueue.enqueue.rows import Rows
from jobqueue.model import fields
from jobqueue.model.job import Job, JobNotFound, JobStateError, JobStatus

# What PATCH /jobs/{id} may change.
EDITABLE = (
    "run_at", "delay_seconds", "priority", "queue", "max_attempts", "payload", "tags", "meta",
)  # fmt: skip


class WorkflowJobError(Exception):
    """A job of a workflow cannot be deleted alone (HTTP 409)."""

    def __init__(self, job: Job) -> None:
        super().__init__(
            f"job {job.id} belongs to workflow {job.workflow_id}: its jobs are deleted "
            f"with it, not one by one; cancel the workflow instead "
            f"(POST /workflows/{job.workflow_id}/cancel)"
        )
        self.job = job


async def update(
    store: Store, rows: Rows, job_id: int, changes: Mapping[str, Any], *, by: Actor | None
) -> Job:
    """See JobQueue.update_job."""
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise TypeError(f"unknown job fields: {', '.join(unknown)}")
    if not changes:
        raise ValueError("changes: name at least one field to change")
    if changes.get("run_at") is not None and changes.get("delay_seconds") is not None:
        raise ValueError("run_at: give run_at or delay_seconds, not both")
    options = {k: v for k, v in changes.items() if k != "payload" and v is not None}
    fields.check_options(**options)
    # Given, they replace the job's own; [] and {} remove them.
    tags = None if changes.get("tags") is None else fields.check_tags(changes["tags"]) or []
    meta = None if changes.get("meta") is None else fields.meta_json(changes["meta"]) or "{}"
    async with store.transaction() as tx:
        current = await tx.get_job(job_id=job_id)
        payload = None
        if "payload" in changes and current is not None:
            payload = rows.payload(current.type, changes["payload"])  # as at enqueue
        changed = await tx.job_update(
            job_id=job_id,
            run_at=changes.get("run_at"),
            delay_seconds=changes.get("delay_seconds"),
            priority=changes.get("priority"),
            queue=changes.get("queue"),
            max_attempts=changes.get("max_attempts"),
            payload=payload,
            tags=tags,
            meta=meta,
        )
        job = changed or await tx.get_job(job_id=job_id)
        result = audit.OK if changed is not None else refusal(job)
        await _audit(tx, by, Action.JOB_UPDATE, job_id, result, fields=sorted(changes))
    return _or_refused(changed, job, job_id, "change")


async def run_now(store: Store, job_id: int, *, by: Actor | None) -> Job:
    """See JobQueue.run_now."""
    async with store.transaction() as tx:
        changed = await tx.job_run_now(job_id=job_id)
        job = changed or await tx.get_job(job_id=job_id)
        # A pending job due already needs nothing: it is answered as it is.
        ok = changed is not None or (job is not None and job.status == JobStatus.PENDING)
        await _audit(tx, by, Action.JOB_RUN_NOW, job_id, audit.OK if ok else refusal(job))
    return _or_refused(job if ok else None, job, job_id, "run now")


async def delete(store: Store, job_id: int, *, by: Actor | None) -> None:
    """See JobQueue.delete_job."""
    async with store.transaction() as tx:
        deleted = await tx.job_delete(job_id=job_id)
        job = None if deleted else await tx.get_job(job_id=job_id)
        result = audit.OK if deleted else refusal(job)
        if job is not None and job.workflow_id is not None and job.status != JobStatus.RUNNING:
            result = audit.conflict("workflow")
        await _audit(tx, by, Action.JOB_DELETE, job_id, result)
    if deleted:
        return
    if job is None:
        raise JobNotFound(job_id)
    if job.status == JobStatus.RUNNING:
        raise JobStateError(job, "delete", "not running (cancel it first, then)")
    raise WorkflowJobError(job)


def _or_refused(changed: Job | None, job: Job | None, job_id: int, action: str) -> Job:
    if changed is not None:
        return changed
    if job is None:
        raise JobNotFound(job_id)
    raise JobStateError(job, action, "pending (due, scheduled or retrying)")


async def _audit(
    tx: Store, by: Actor | None, action: Action, job_id: int, result: str, **filter: Any
) -> None:
    if by is not None:
        await audit.record_as(tx, by, action, target=job_id, filter=filter or None, result=result)
