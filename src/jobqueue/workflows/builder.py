"""Building a workflow from Python: nodes, then shapes made of them.

    wf = jq.workflow("nightly")
    a = wf.add("extract", {"day": "2026-12-01"})
    b, c = wf.group(step("transform", {"part": 1}), step("transform", {"part": 2}),
                    depends_on=[a])
    wf.add("load", depends_on=[b, c])
    created = await wf.enqueue()            # or enqueue(conn=...) in your transaction

Each node takes the options of ``enqueue`` (queue, priority, max_attempts, run_at,
delay_seconds, unique_key, unique_for), and two of its own: ``on_failure`` (what its
failing for good does to the jobs waiting on it: "cancel" them, the workflow's
default unless set, or let them "continue") and ``run_if`` ("completed": once every
parent completed; "finished": once every parent ended, however; "failed": only if one
of them failed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Unpack, cast

from jobqueue.enqueue.rows import Rows
from jobqueue.model.options import JOB_OPTIONS, EnqueueOptions
from jobqueue.workflows.model import (
    ON_FAILURE,
    RUN_IF,
    CreatedWorkflow,
    OnFailure,
    RunIf,
    WorkflowError,
)
from jobqueue.workflows.plan import Planned, check, planned


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """A job not placed in a workflow yet: what ``chain``, ``group``, ``chord`` and
    ``batch`` take (see ``step``)."""

    type: str
    payload: Any = None
    ref: str | None = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


def step(
    type: str, payload: Any = None, *, ref: str | None = None, **options: Unpack[EnqueueOptions]
) -> Step:
    """A job for a shape: its type, payload, ref (default: made up) and options."""
    return Step(type, payload, ref, dict(options))


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """A job placed in a workflow; other nodes may wait for it (``depends_on``)."""

    ref: str


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    """A batch's members and its callbacks (None where none was given)."""

    jobs: list[Node]
    on_success: Node | None
    on_failure: Node | None
    on_finish: Node | None


@dataclasses.dataclass(frozen=True, slots=True)
class _Spec:
    ref: str
    type: str
    payload: Any
    options: dict[str, Any]
    depends_on: tuple[str, ...]
    on_failure: OnFailure | None
    run_if: RunIf


Parents = Iterable[Node | str]
Creator = Callable[[str | None, list[Planned], Any], Awaitable[CreatedWorkflow]]

_OPTIONS = frozenset(JOB_OPTIONS)


class WorkflowBuilder:
    """Nodes of one workflow, stored all or none by ``enqueue`` (``jq.workflow()``)."""

    def __init__(
        self,
        rows: Rows,
        create: Creator,
        name: str | None = None,
        *,
        on_failure: OnFailure = "cancel",
    ) -> None:
        if on_failure not in ON_FAILURE:
            raise WorkflowError("on_failure", f"must be one of {', '.join(ON_FAILURE)}")
        self._rows = rows
        self._create = create
        self.name = name
        self.on_failure: OnFailure = on_failure
        self._specs: list[_Spec] = []
        self._refs: set[str] = set()

    def add(
        self,
        type: str | Step,
        payload: Any = None,
        *,
        ref: str | None = None,
        depends_on: Parents = (),
        on_failure: OnFailure | None = None,
        run_if: RunIf = "completed",
        **given: Unpack[EnqueueOptions],
    ) -> Node:
        """One job, waiting for the nodes ``depends_on`` (nodes or their refs). The other
        options are ``jq.enqueue``'s."""
        options: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if isinstance(type, Step):
            options = {**type.options, **options}
            given_step = type
            type, payload, ref = given_step.type, given_step.payload, ref or given_step.ref
        unknown = set(options) - _OPTIONS
        if unknown:
            raise TypeError(f"unknown job options: {', '.join(sorted(unknown))}")
        if on_failure is not None and on_failure not in ON_FAILURE:
            raise WorkflowError("on_failure", f"must be one of {', '.join(ON_FAILURE)}")
        if run_if not in RUN_IF:
            raise WorkflowError("run_if", f"must be one of {', '.join(RUN_IF)}")
        ref = ref or f"{type}-{len(self._specs) + 1}"
        if ref in self._refs:
            raise WorkflowError("ref", f"ref {ref!r} is used twice")
        self._refs.add(ref)
        parents = tuple(p.ref if isinstance(p, Node) else p for p in depends_on)
        self._specs.append(_Spec(ref, type, payload, options, parents, on_failure, run_if))
        return Node(ref)

    def chain(self, *steps: Step, depends_on: Parents = ()) -> list[Node]:
        """Each step waits for the one before (the first for ``depends_on``)."""
        nodes: list[Node] = []
        parents: Parents = tuple(depends_on)
        for s in steps:
            nodes.append(self.add(s, depends_on=parents))
            parents = (nodes[-1],)
        return nodes

    def group(self, *steps: Step, depends_on: Parents = ()) -> list[Node]:
        """Steps that run side by side, each after ``depends_on``."""
        parents = tuple(depends_on)
        return [self.add(s, depends_on=parents) for s in steps]

    def chord(self, steps: Sequence[Step], callback: Step, *, depends_on: Parents = ()) -> Node:
        """A group and a callback that waits for all of it (and sees every result)."""
        return self.add(callback, depends_on=self.group(*steps, depends_on=depends_on))

    def batch(
        self,
        steps: Sequence[Step],
        *,
        on_success: Step | None = None,
        on_failure: Step | None = None,
        on_finish: Step | None = None,
        depends_on: Parents = (),
    ) -> Batch:
        """A group with callbacks: ``on_success`` once all completed, ``on_failure`` once
        all ended and one failed, ``on_finish`` once all ended, whatever their end."""
        members = [self.add(s, depends_on=tuple(depends_on), on_failure="cancel") for s in steps]
        return Batch(
            members,
            None if on_success is None else self.add(on_success, depends_on=members),
            None
            if on_failure is None
            else self.add(on_failure, depends_on=members, run_if="failed"),
            None
            if on_finish is None
            else self.add(on_finish, depends_on=members, run_if="finished"),
        )

    def planned(self, trace: str | None = None) -> list[Planned]:
        """The rows to store, checked (ValueError naming the job at fault)."""
        jobs = []
        for i, s in enumerate(self._specs):
            o = cast("EnqueueOptions", s.options)
            try:
                row = self._rows.row(s.type, s.payload, o, trace)
            except WorkflowError:
                raise
            except ValueError as exc:
                raise WorkflowError(f"jobs[{i}]", str(exc)) from exc
            jobs.append(
                planned(
                    row,
                    ref=s.ref,
                    depends_on=s.depends_on,
                    on_failure=s.on_failure or self.on_failure,
                    run_if=s.run_if,
                    unique_key=o.get("unique_key"),
                    unique_for=o.get("unique_for"),
                )
            )
        check(jobs)
        return jobs

    async def enqueue(self, *, conn: Any = None) -> CreatedWorkflow:
        """Store every node, all or none (in ``conn``'s transaction if given, as
        ``enqueue(conn=...)``); the workflow's id and each ref's job id."""
        return await self._create(self.name, self.planned(), conn)
