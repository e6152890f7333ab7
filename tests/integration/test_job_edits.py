"""Job edits from Python: a payload checked against its task's type as at enqueue, the
rules of enqueue's options, a workflow's job not deleted alone."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from jobqueue import PayloadError
from jobqueue.app import JobQueue
from jobqueue.job_edits import WorkflowJobError
from jobqueue.model.job import JobStateError, JobStatus

pytestmark = pytest.mark.anyio


class Resize(BaseModel):
    width: int


async def test_edits_follow_the_rules_of_enqueue(jq: JobQueue) -> None:
    @jq.task("resize")
    async def resize(payload: Resize) -> None:
        return None

    job = await jq.enqueue("resize", {"width": 10}, delay_seconds=60)
    with pytest.raises(PayloadError, match="width"):
        await jq.update_job(job.id, payload={"width": "wide"})
    with pytest.raises(ValueError, match=r"^priority"):
        await jq.update_job(job.id, priority=2**40)
    with pytest.raises(TypeError, match="unknown job fields: colour"):
        await jq.update_job(job.id, colour="red")
    assert (await jq.get(job.id)) == job  # nothing changed
    changed = await jq.update_job(job.id, payload={"width": 20}, delay_seconds=0)
    assert changed.payload == {"width": 20}
    assert changed.run_at <= changed.updated_at
    # Due now: run_now leaves it as it is.
    assert (await jq.run_now(job.id)).run_at == changed.run_at


async def test_a_workflow_job_is_not_deleted_alone_nor_an_ended_one_changed(
    jq: JobQueue,
) -> None:
    wf = jq.workflow("pair")
    first = wf.add("noop", ref="first")
    wf.add("noop", ref="second", depends_on=[first])
    made = await wf.enqueue()
    job_id = made.jobs["first"]
    with pytest.raises(WorkflowJobError, match="cancel the workflow"):
        await jq.delete_job(job_id)
    cancelled = await jq.cancel((await jq.enqueue("noop")).id)
    assert cancelled.status == JobStatus.CANCELLED
    with pytest.raises(JobStateError, match="it is cancelled"):
        await jq.update_job(cancelled.id, priority=1)
    await jq.delete_job(cancelled.id)  # an ended job can go
    assert await jq.get(cancelled.id) is None
