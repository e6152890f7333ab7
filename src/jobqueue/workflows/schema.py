"""NewWorkflow: a workflow as POST /workflows receives it; each job takes the fields of
POST /jobs (NewJob) and its place in the graph."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from jobqueue.enqueue.new_job import NewJob
from jobqueue.enqueue.rows import Rows
from jobqueue.model import fields
from jobqueue.workflows.model import MAX_JOBS, REF_MAX_LENGTH, OnFailure, RunIf, WorkflowError
from jobqueue.workflows.plan import Planned, check, planned

# Stored as text: one the database cannot store (a NUL, half a surrogate pair) is a
# 422 naming the field, as for a job's own text.
Ref = Annotated[
    str,
    StringConstraints(min_length=1, max_length=REF_MAX_LENGTH),
    AfterValidator(fields.storable),
]


class NewWorkflowJob(NewJob):
    model_config = ConfigDict(extra="forbid")

    ref: Ref = Field(description="The job's name in this workflow, for depends_on.")
    depends_on: list[Ref] = Field(
        default_factory=list, description="Refs of the jobs this one waits for."
    )
    on_failure: OnFailure | None = Field(
        default=None,
        description="When this job fails for good: `cancel` the jobs waiting on it, or "
        "let them `continue`; default: the workflow's.",
    )
    run_if: RunIf = Field(
        default="completed",
        description="Run once every parent `completed`, once every parent `finished` "
        "whatever its end, or only if one `failed`.",
    )


class NewWorkflow(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "jobs": [
                        {"ref": "a", "type": "noop", "payload": {}},
                        {"ref": "b", "type": "noop", "payload": {}, "depends_on": ["a"]},
                    ]
                }
            ]
        },
    )

    name: (
        Annotated[str, StringConstraints(max_length=200), AfterValidator(fields.storable)] | None
    ) = None
    on_failure: OnFailure = Field(
        default="cancel", description="The jobs' on_failure unless they set their own."
    )
    jobs: list[NewWorkflowJob] = Field(min_length=1, max_length=MAX_JOBS)


def planned_of(spec: NewWorkflow, rows: Rows, trace: str | None = None) -> list[Planned]:
    """The rows of a validated NewWorkflow, its graph checked (WorkflowError)."""
    jobs = []
    for i, job in enumerate(spec.jobs):
        try:
            row = rows.row_of(job, trace)
        except ValueError as exc:
            raise WorkflowError(f"jobs[{i}]", str(exc)) from exc
        jobs.append(
            planned(
                row,
                ref=job.ref,
                depends_on=job.depends_on,
                on_failure=job.on_failure or spec.on_failure,
                run_if=job.run_if,
                unique_key=job.unique_key,
                unique_for=job.unique_for,
            )
        )
    check(jobs)
    return jobs
