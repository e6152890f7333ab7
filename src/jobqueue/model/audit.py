"""One entry of the audit log as users read it (``GET /audit``, ``jobqueue audit``), and
the actions and results it records. Writing entries is jobqueue.audit's."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar


class Action(enum.StrEnum):
    JOB_RETRY = "job.retry"
    JOBS_RETRY = "jobs.retry"  # by filter
    JOB_CANCEL = "job.cancel"
    JOBS_CANCEL = "jobs.cancel"  # by filter
    JOB_UPDATE = "job.update"  # the filter names the fields changed
    JOB_RUN_NOW = "job.run_now"
    JOB_DELETE = "job.delete"
    JOB_SIGNAL = "job.signal"  # the filter names the signal
    QUEUE_PAUSE = "queue.pause"
    QUEUE_RESUME = "queue.resume"
    QUEUE_LIMITS = "queue.limits"  # its shared limits set (the filter says which)
    TOKEN_CREATE = "token.create"
    TOKEN_REVOKE = "token.revoke"
    WORKFLOW_CANCEL = "workflow.cancel"
    TYPE_DECLARE = "type.declare"  # a job type declared, or its payload schema replaced
    TYPE_REMOVE = "type.remove"
    SCHEDULE_CREATE = "schedule.create"
    SCHEDULE_UPDATE = "schedule.update"  # the filter names the fields changed
    SCHEDULE_DELETE = "schedule.delete"
    SCHEDULE_PAUSE = "schedule.pause"
    SCHEDULE_RESUME = "schedule.resume"
    SCHEDULE_TRIGGER = "schedule.trigger"
    REQUEST_REFUSED = "request.refused"  # a 403: the token may not do it (api/refusals.py)


OK = "ok"
NOT_FOUND = "not_found"


def conflict(state: str) -> str:
    """The result of an action refused for the state its job is in: ``conflict:running``."""
    return f"conflict:{state}"


@dataclasses.dataclass(frozen=True, slots=True)
class AuditEntry:
    """One row of the audit log, as ``GET /audit`` and ``jobqueue audit --json`` show it."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    "id": 41,
                    "at": "2026-12-01T09:30:00Z",
                    "actor": "ops-dashboard",
                    "action": "jobs.retry",
                    "target": None,
                    "filter": {"type": "send_email", "statuses": ["cancelled", "failed"]},
                    "count": 3,
                    "client": "10.0.0.7",
                    "result": "ok",
                }
            ]
        }
    }

    id: int
    at: datetime
    actor: str
    action: str
    # the job id, queue name or token name acted on; a refused request's method and path
    target: str | None
    filter: dict[str, Any] | None  # a bulk action's filters
    # the jobs touched (the requests, for a refused request); None for a queue or a token
    count: int | None
    client: str | None  # the HTTP client's address; None from the command line
    # ok, not_found, conflict:<the job's state>, or forbidden:<what> for a refused request
    result: str

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> AuditEntry:
        fields = dict(record.items())
        if fields["filter"] is not None:
            fields["filter"] = json.loads(fields["filter"])
        return cls(**fields)
