"""A job's recorded steps, as shown (docs/durable.md)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any, ClassVar

from jobqueue.model.job import Job


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """A step a job's handler ran through ``ctx.step``, as recorded."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    "name": "charge",
                    "attempt": 1,
                    "result": {"charge_id": "ch_3PqX"},
                    "worker_id": "web-1:4242:1f2e3d",
                    "recorded_at": "2026-12-06T10:00:00.120Z",
                }
            ]
        }
    }

    name: str
    attempt: int
    """The attempt that ran it; later attempts returned its result without running it."""
    result: Any
    """What the step's function returned, as JSON; null for None."""
    worker_id: str
    recorded_at: datetime

    @classmethod
    def from_record(cls, r: Any) -> Step:
        result = r["result"]
        if isinstance(result, str):  # asyncpg gives jsonb as text
            result = json.loads(result)
        return cls(r["name"], r["attempt"], result, r["worker_id"], r["recorded_at"])


@dataclasses.dataclass(frozen=True, slots=True)
class JobDetail(Job):
    """A job with the steps its handler recorded: what GET /jobs/{id} answers."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "json_schema_extra": {
            "examples": [
                {
                    **Job.__pydantic_config__["json_schema_extra"]["examples"][0],
                    "type": "fulfil_order",
                    "payload": {"order_id": "o-7"},
                    "result": {"charge": "ch_3PqX", "tracking": "1Z999"},
                    "checkpoint": None,
                    "steps": [
                        {
                            "name": "charge",
                            "attempt": 1,
                            "result": {"id": "ch_3PqX"},
                            "worker_id": "web-1:4242:1f2e3d",
                            "recorded_at": "2026-11-29T10:00:00.02Z",
                        },
                        {
                            "name": "label",
                            "attempt": 2,
                            "result": {"tracking": "1Z999"},
                            "worker_id": "web-2:977:a0b1c2",
                            "recorded_at": "2026-11-29T10:00:31.4Z",
                        },
                    ],
                }
            ]
        }
    }

    steps: list[Step] = dataclasses.field(default_factory=list)
    """The steps its handler ran through ``ctx.step`` (docs/durable.md), in the order
    they were recorded; [] for a job that ran none."""

    @classmethod
    def of(cls, job: Job, steps: list[Step]) -> JobDetail:
        fields = {f.name: getattr(job, f.name) for f in dataclasses.fields(Job)}
        return cls(**fields, steps=steps)
