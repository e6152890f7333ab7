"""Storing and reading workflows: one transaction for a whole workflow.

Creating one inserts its row, its jobs (those without a unique key in one
statement), then its edges. Jobs with parents are stored blocked, so that none can
run before the transaction commits and every edge exists. Inside the application's
own transaction (``conn=``) an asyncpg connection takes a savepoint, so that a
refusal stores nothing; other drivers rely on the transaction they are in.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobqueue import audit
from jobqueue.audit import Action, Actor
from jobqueue.db.store import Store
from jobqueue.logs import get_logger
from jobqueue.model.job import JobStatus
from jobqueue.workflows.model import (
    CreatedWorkflow,
    Workflow,
    WorkflowError,
    WorkflowJob,
    WorkflowSummary,
    status_of,
    status_of_states,
)
from jobqueue.workflows.plan import Planned

log = get_logger("jobqueue.workflows")


async def create(store: Store, name: str | None, jobs: Sequence[Planned]) -> CreatedWorkflow:
    """Store the workflow ``jobs`` make up (checked already: plan.check)."""
    async with store.atomic() as store:
        workflow_id = await store.workflow_create(name=name)
        ids: dict[str, int] = {}
        plain = [p for p in jobs if p.unique_key is None]
        if plain:
            stored = await store.workflow_insert_jobs(
                workflow_id=workflow_id,
                rows=[p.row for p in plain],
                nodes=[p.node for p in plain],
            )
            ids.update(zip((p.node.ref for p in plain), stored, strict=True))
        for i, p in enumerate(jobs):
            if p.unique_key is not None:
                ids[p.node.ref] = await _store_unique(store, workflow_id, i, p, p.unique_key)
        children = [ids[p.node.ref] for p in jobs for _ in p.depends_on]
        parents = [ids[ref] for p in jobs for ref in p.depends_on]
        if children:
            await store.workflow_insert_edges(children=children, parents=parents)
    log.info(
        f"Workflow {workflow_id} stored with {len(jobs)} jobs",
        workflow_id=workflow_id,
        jobs=len(jobs),
        name=name,
    )
    return CreatedWorkflow(workflow_id, {p.node.ref: ids[p.node.ref] for p in jobs})


async def _store_unique(store: Store, workflow_id: int, i: int, p: Planned, key: str) -> int:
    """A node under a unique key: stored if the key is free. A held key refuses the whole
    workflow: its dependents would wait on a job that is not the workflow's."""
    job = await store.enqueue_unique(row=p.row, unique_key=key, hold_seconds=p.unique_for)
    if job is None:
        holder = await store.unique_holder(unique_key=key)
        held = "" if holder is None else f" by job {holder.id}"
        raise WorkflowError(f"jobs[{i}].unique_key", f"key {key!r} is held{held}")
    await store.workflow_adopt(job_id=job.id, workflow_id=workflow_id, node=p.node)
    return job.id


async def get(store: Store, workflow_id: int) -> Workflow | None:
    """The workflow and every job of it."""
    row = await store.workflow_get(workflow_id=workflow_id)
    if row is None:
        return None
    jobs = [WorkflowJob(*node) for node in await store.workflow_jobs(workflow_id=workflow_id)]
    return Workflow(row.id, row.name, row.created_at, status_of([j.job for j in jobs]), jobs)


async def recent(store: Store, limit: int) -> list[WorkflowSummary]:
    """The ``limit`` newest workflows, newest first, with their jobs counted by state."""
    summaries = []
    for row in await store.workflow_list(limit=limit):
        jobs = {state: getattr(row, state) for state in STATES}
        status = status_of_states({state for state, count in jobs.items() if count})
        summaries.append(WorkflowSummary(row.id, row.name, row.created_at, status, jobs))
    return summaries


# Every state a workflow's job can be in, in the order of its life.
STATES = tuple(status.value for status in JobStatus)


async def cancel(store: Store, workflow_id: int, *, by: Actor | None = None) -> Workflow | None:
    """Cancel every job of the workflow not ended yet, with its audit row (``by``) in
    the same transaction; the workflow as it is then (None: no such workflow)."""
    async with store.transaction() as tx:
        found = await tx.workflow_get(workflow_id=workflow_id) is not None
        cancelled = await tx.workflow_cancel(workflow_id=workflow_id) if found else []
        if by is not None:
            await audit.record_as(
                tx,
                by,
                Action.WORKFLOW_CANCEL,
                target=workflow_id,
                count=len(cancelled),
                result=audit.OK if found else audit.NOT_FOUND,
            )
    if found:
        log.info(
            f"Workflow {workflow_id} cancelled",
            workflow_id=workflow_id,
            cancelled=sum(c.status == "cancelled" for c in cancelled),
            asked_to_stop=sum(c.status == "running" for c in cancelled),
        )
    return await get(store, workflow_id) if found else None
