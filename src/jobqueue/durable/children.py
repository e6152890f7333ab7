"""Children spawned at run time (docs/durable.md#children).

``ctx.spawn`` stores child jobs linked to the running job, in one transaction with the
step that memoises their ids, fenced by the attempt's claim: a replay gets the same ids
and stores nothing. ``ctx.wait_for`` returns the children's results once every child
of the job has ended. Until then the job waits, holding no worker's slot, and the last
child to end makes it pending again in that child's transaction (migration 0035); its
next run replays to the same ``wait_for``, which then returns at once.

A child that failed or was cancelled cancels its parent, and the parent's other
children with it, unless it was spawned with ``on_failure="continue"``: then the
parent's ``wait_for`` returns a ChildFailed in its place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobqueue import observability
from jobqueue.durable.steps import NOT_RECORDED, Suspended
from jobqueue.model.steps import SPAWN
from jobqueue.observability import trace_context

if TYPE_CHECKING:
    from jobqueue.db.records import JobRow
    from jobqueue.durable.steps import DurableRun

ON_FAILURE = ("cancel", "continue")
# Options of enqueue that a child does not take: its parent's spawn is its only writer,
# memoised, so a key would guard nothing.
_NOT_FOR_CHILDREN = {"unique_key", "unique_for", "on_conflict"}


class ChildFailed(Exception):
    """A child that failed or was cancelled, in ``ctx.wait_for``'s results where its
    result would be (children spawned with ``on_failure="continue"``)."""

    def __init__(self, job_id: int, status: str, error: str | None) -> None:
        super().__init__(f"child job {job_id} {status}: {error or 'no error recorded'}")
        self.job_id = job_id
        self.status = status
        self.error = error


async def spawn(run: DurableRun, jobs: Iterable[Any], on_failure: str) -> list[int]:
    """``ctx.spawn``: the children's ids, stored and recorded as the step "spawn-N" (the
    run's Nth spawn) by the run that first got here."""
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {', '.join(ON_FAILURE)}, got {on_failure!r}")
    run.spawns += 1
    step = f"{SPAWN}{run.spawns}"
    found = await run.recall(step)
    if found is not NOT_RECORDED:
        return list(found)
    rows = _rows(run, jobs)
    durable, job = run.durable, run.job
    async with durable.store.transaction() as tx:
        ids = [j.id for j in await tx.enqueue_rows(rows=rows)] if rows else []
        held = await tx.spawn_adopt(
            job_id=job.id, children=ids, on_failure=on_failure, worker_id=durable.worker_id,
            claim=job.claim,
        )  # fmt: skip
        if not held:  # raised inside: the transaction rolls back, no child is stored
            raise run.lost(f"its children ({step!r}) were not stored")
        await tx.step_record(
            job_id=job.id, name=step, result=json.dumps(ids), worker_id=durable.worker_id,
            claim=job.claim,
        )  # fmt: skip
    if rows:
        observability.enqueued(rows)
    return ids


async def wait_for(run: DurableRun, children: Sequence[int]) -> list[Any]:
    """``ctx.wait_for``: the children's results, in the order given, once every child of
    the job has ended; until then Suspended ends the run, the job waiting."""
    ids = [_child_id(c) for c in children]
    durable, job = run.durable, run.job
    found = await durable.store.children_wait(
        job_id=job.id, children=ids, worker_id=durable.worker_id, claim=job.claim
    )
    if found.strangers:
        raise ValueError(
            f"wait_for: {found.strangers} of the ids given are not children of job {job.id}"
            " (wait for the ids ctx.spawn returned)"
        )
    if found.status is not None:  # waiting now, or cancelled by a child's failure
        raise Suspended(found.status, "children")
    if not found.held:
        raise run.lost("it did not wait for its children")
    ended = {c.id: c for c in await durable.store.children_results(job_id=job.id, children=ids)}
    results: list[Any] = []
    for child_id in ids:
        child = ended[child_id]
        results.append(
            child.result
            if child.status == "completed"
            else ChildFailed(child.id, child.status, child.error)
        )
    return results


def _rows(run: DurableRun, jobs: Iterable[Any]) -> list[JobRow]:
    """Each child's row, checked as enqueue checks a job (ValueError naming it)."""
    checker = run.durable.rows
    if checker is None:
        raise RuntimeError("ctx.spawn needs a worker's context, which knows its tasks")
    trace = trace_context.recorded(bulk=True)
    rows = []
    for i, spec in enumerate(jobs):
        if not isinstance(spec, tuple) or not 2 <= len(spec) <= 3 or not isinstance(spec[0], str):
            raise ValueError(
                f"spawn: jobs[{i}] must be (type, payload) or (type, payload, options), "
                f"got {spec!r}"
            )
        options: Mapping[str, Any] = spec[2] if len(spec) == 3 else {}
        if not isinstance(options, Mapping):
            raise ValueError(f"spawn: jobs[{i}]'s options must be a mapping, got {options!r}")
        if unkept := sorted(set(options) & _NOT_FOR_CHILDREN):
            raise ValueError(f"spawn: jobs[{i}]: a child takes no {', '.join(unkept)}")
        try:
            rows.append(checker.row(spec[0], spec[1], dict(options), trace))  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"spawn: jobs[{i}]: {exc}") from None
    return rows


def _child_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"wait_for takes the job ids ctx.spawn returned, got {value!r}")
    return value
