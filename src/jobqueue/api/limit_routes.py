"""``PATCH /queues/{name}``: a queue's limits shared by every worker (jobqueue.model.limits)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from jobqueue.api.errors import field_error
from jobqueue.api.responses import BODY, INVALID, UNAVAILABLE, declare
from jobqueue.api.schemas import QueueName
from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.auth import access
from jobqueue.auth.authenticator import require
from jobqueue.model.job import QueueInfo
from jobqueue.model.limits import MAX_COUNT, parse_rate
from jobqueue.model.tokens import Principal, Scope

router = APIRouter()


def _rate(text: str) -> str:
    """The rate as stored ("100/m"); the error leaves the field's name to pydantic's loc."""
    try:
        return str(parse_rate(text, "rate"))
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix("rate: ")) from None


Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
RateText = Annotated[str, AfterValidator(_rate)]


class LimitsPatch(BaseModel):
    """The limits to change; a limit left out is kept, null removes it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"global_limit": 5}, {"rate_limit": "100/m"}, {"key_limit": 2}]
        },
    )

    global_limit: Count | None = Field(
        default=None, description="At most this many of the queue's jobs run at once."
    )
    key_limit: Count | None = Field(
        default=None, description="At most this many jobs of one concurrency key run at once."
    )
    rate_limit: RateText | None = Field(
        default=None,
        description='At most N starts in any window of the period: "N/s", "N/m" or "N/h".',
    )
    key_rate_limit: RateText | None = Field(
        default=None, description="As rate_limit, for each concurrency key."
    )


@router.patch(
    "/queues/{name}",
    response_model=QueueInfo,
    summary="Set a queue's limits",
    responses=declare(BODY, INVALID, UNAVAILABLE),
)
async def set_queue_limits(
    request: Request,
    who: Annotated[Principal, require(Scope.QUEUES)],
    name: QueueName,
    patch: LimitsPatch,
) -> QueueInfo:
    """Limits that hold across every worker process and host (see the Limits guide);
    the queue need have no jobs yet. Workers claim by them within one poll interval.
    The answer is the queue with its limits and their use (`limits`)."""
    access.may_control_queue(who, name)
    given = {field: getattr(patch, field) for field in patch.model_fields_set}
    if not given:
        raise HTTPException(
            422,
            detail=[field_error(["body"], "name at least one limit to change", "missing")],
        )
    jq: JobQueue = request.app.state.jobqueue
    return await jq.set_limits(name, by=Actor.of(who), **given)
