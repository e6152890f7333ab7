"""A job as GET /jobs/{id}, ``jobqueue jobs get`` and the dashboard's job page show it:
with the steps its handler recorded, what it waits for, its parent and its children."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobqueue.model.steps import CHILDREN_SHOWN, JobDetail

if TYPE_CHECKING:
    from jobqueue.db.store import Store
    from jobqueue.model.job import Job


async def detail(store: Store, job: Job) -> JobDetail:
    """``job`` with its steps, its wait, its parent and its first children."""
    waits = await store.job_detail(job_id=job.id)
    if waits is None:  # deleted since it was read: as it was, with nothing recorded
        return JobDetail.of(job, [])
    children = None
    if waits.has_children:
        children = await store.job_children(job_id=job.id, limit=CHILDREN_SHOWN)
    return JobDetail.of(
        job, waits.steps, awaiting=waits.awaiting, spawned_by=waits.spawned_by, children=children
    )
