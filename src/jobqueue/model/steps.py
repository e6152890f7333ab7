"""A job's recorded steps, as shown (docs/durable.md)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, ClassVar

from jobqueue.model.job import Job
from jobqueue.model.json_text import loads


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
        if result is not None:  # jsonb as text (a JSON null is text too: "null")
            result = loads(result)
        return cls(r["name"], r["attempt"], result, r["worker_id"], r["recorded_at"])


@dataclasses.dataclass(frozen=True, slots=True)
class Child:
    """A job that its parent's handler spawned (``ctx.spawn``)."""

    id: int
    type: str
    status: str


@dataclasses.dataclass(frozen=True, slots=True)
class Children:
    """A job's children: how many it spawned and how many have ended, and the first of
    them (at most CHILDREN_SHOWN)."""

    total: int
    ended: int
    first: list[Child]


@dataclasses.dataclass(frozen=True, slots=True)
class WaitingFor:
    """What a waiting job waits for: its children (``children``: how many it spawned,
    ``ended``: how many have ended), a signal (``signal``: its name, ``until``: its time
    limit, if any), or a time (``until``)."""

    until: datetime | None = None
    signal: str | None = None
    children: int | None = None
    ended: int | None = None


# The children GET /jobs/{id} and the job page list; the counts cover all of them.
CHILDREN_SHOWN = 100


@dataclasses.dataclass(slots=True)  # as Job
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
    waiting_for: WaitingFor | None = None
    """For a waiting job, what it waits for; null otherwise."""
    spawned_by: int | None = None
    """The job whose handler spawned this one (``ctx.spawn``); null for none."""
    children: Children | None = None
    """The jobs its handler spawned; null for none."""

    @classmethod
    def of(
        cls,
        job: Job,
        steps: list[Step],
        *,
        awaiting: str | None = None,
        spawned_by: int | None = None,
        children: Children | None = None,
    ) -> JobDetail:
        fields = {f.name: getattr(job, f.name) for f in dataclasses.fields(Job)}
        waiting_for = None
        if job.status == "waiting":
            waiting_for = _waiting_for(job, steps, awaiting, children)
        return cls(
            **fields, steps=steps, waiting_for=waiting_for, spawned_by=spawned_by,
            children=children,
        )  # fmt: skip


def _waiting_for(
    job: Job, steps: list[Step], awaiting: str | None, children: Children | None
) -> WaitingFor:
    """A waiting job's wait, from its row and its steps: the run's last wait recorded
    a step (sleep-N: the time; signal-N: the signal's name and time limit)."""
    if awaiting == "children":
        return WaitingFor(
            children=0 if children is None else children.total,
            ended=0 if children is None else children.ended,
        )
    for step in reversed(steps):
        if step.name.startswith(SIGNAL) and isinstance(step.result, dict):
            return WaitingFor(
                until=None if awaiting == "signal" else job.run_at,
                signal=step.result.get("name"),
            )
        if step.name.startswith(SLEEP):
            break
    return WaitingFor(until=job.run_at)


# The names of a run's waits: its sleeps ("sleep-1"...), its waits for signals
# ("signal-1"...) and its spawns ("spawn-1"...), which a step may not take.
SLEEP = "sleep-"
SIGNAL = "signal-"
SPAWN = "spawn-"
RESERVED = (SLEEP, SIGNAL, SPAWN)
