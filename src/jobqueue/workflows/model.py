"""A workflow as described (nodes and their dependencies) and as stored (its jobs).

The graph is checked before anything is stored: every ref a node waits for names a
node of the workflow, and no node waits for itself through others (a cycle would
block every job on it for ever). Errors name the field, as HTTP answers them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from jobqueue.model.job import Job, JobStatus

OnFailure = Literal["cancel", "continue"]
RunIf = Literal["completed", "finished", "failed"]
ON_FAILURE: tuple[OnFailure, ...] = ("cancel", "continue")
RUN_IF: tuple[RunIf, ...] = ("completed", "finished", "failed")
# A workflow is one transaction; this bounds its statements and the memory they take.
MAX_JOBS = 100_000
REF_MAX_LENGTH = 200


class WorkflowError(ValueError):
    """A workflow that cannot be stored; ``field`` names the part at fault
    (``jobs[3].depends_on``), as a 422 answer does."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    @property
    def loc(self) -> list[str | int]:
        """The field as a location: ``jobs[3].depends_on`` is ["jobs", 3, "depends_on"]."""
        loc: list[str | int] = []
        for part in self.field.replace("[", ".").replace("]", "").split("."):
            loc.append(int(part) if part.isdigit() else part)
        return loc


@dataclasses.dataclass(frozen=True, slots=True)
class Edge:
    """One node's place in the graph: its ref and the refs it waits for."""

    ref: str
    depends_on: tuple[str, ...]


def order(edges: Sequence[Edge]) -> None:
    """Check the graph: unique refs, known dependencies, no cycle (WorkflowError)."""
    if not edges:
        raise WorkflowError("jobs", "a workflow needs at least one job")
    if len(edges) > MAX_JOBS:
        raise WorkflowError("jobs", f"at most {MAX_JOBS} jobs per workflow")
    index: dict[str, int] = {}
    for i, edge in enumerate(edges):
        if not edge.ref or len(edge.ref) > REF_MAX_LENGTH:
            raise WorkflowError(f"jobs[{i}].ref", f"1 to {REF_MAX_LENGTH} characters")
        if edge.ref in index:
            raise WorkflowError(f"jobs[{i}].ref", f"ref {edge.ref!r} is used twice")
        index[edge.ref] = i
    for i, edge in enumerate(edges):
        for ref in edge.depends_on:
            if ref not in index:
                raise WorkflowError(f"jobs[{i}].depends_on", f"unknown ref {ref!r}")
        if len(set(edge.depends_on)) != len(edge.depends_on):
            raise WorkflowError(f"jobs[{i}].depends_on", "a ref is given twice")
    _no_cycle(edges, index)


def _no_cycle(edges: Sequence[Edge], index: dict[str, int]) -> None:
    """Kahn's algorithm; what is left once no node is free is on (or behind) a cycle."""
    waiting = [len(e.depends_on) for e in edges]
    children: list[list[int]] = [[] for _ in edges]
    for i, edge in enumerate(edges):
        for ref in edge.depends_on:
            children[index[ref]].append(i)
    free = [i for i, n in enumerate(waiting) if n == 0]
    seen = 0
    while free:
        node = free.pop()
        seen += 1
        for child in children[node]:
            waiting[child] -= 1
            if waiting[child] == 0:
                free.append(child)
    if seen < len(edges):
        stuck = {i for i, n in enumerate(waiting) if n > 0}
        cycle = _cycle_from(edges, index, stuck)
        raise WorkflowError(
            f"jobs[{index[cycle[0]]}].depends_on",
            "cycle: " + " -> ".join([*cycle, cycle[0]]) + " (each waits for the next)",
        )


def _cycle_from(edges: Sequence[Edge], index: dict[str, int], stuck: set[int]) -> list[str]:
    """The refs of one cycle among the ``stuck`` nodes: each waits on a stuck one, so
    following those dependencies from any of them comes back to a node already seen."""
    path: list[int] = []
    on_path: dict[int, int] = {}
    node = min(stuck)
    while node not in on_path:
        on_path[node] = len(path)
        path.append(node)
        node = next(index[ref] for ref in edges[node].depends_on if index[ref] in stuck)
    cycle = path[on_path[node] :]
    first = cycle.index(min(cycle))  # named from its earliest job, whatever the path
    return [edges[i].ref for i in cycle[first:] + cycle[:first]]


@dataclasses.dataclass(frozen=True, slots=True)
class CreatedWorkflow:
    """What creating a workflow answers: its id and each ref's job id, in order."""

    id: int
    jobs: dict[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowJob:
    ref: str
    depends_on: list[str]
    job: Job


@dataclasses.dataclass(frozen=True, slots=True)
class Workflow:
    """A stored workflow and every one of its jobs, in creation order."""

    id: int
    name: str | None
    created_at: datetime
    status: str
    """running while a job is blocked, pending, running or waiting; else completed if
    every job did, failed if one failed, cancelled otherwise."""
    jobs: list[WorkflowJob]


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowSummary:
    """A stored workflow with how many of its jobs are in each state (`workflows list`)."""

    id: int
    name: str | None
    created_at: datetime
    status: str
    """As Workflow.status."""
    jobs: dict[str, int]
    """Jobs by state, every state included (0 for none)."""


def status_of(jobs: Sequence[Job]) -> str:
    return status_of_states({job.status for job in jobs})


def status_of_states(states: set[str]) -> str:
    """A workflow's status from the states its jobs are in (see Workflow.status)."""
    if states & {JobStatus.BLOCKED, JobStatus.PENDING, JobStatus.RUNNING, JobStatus.WAITING}:
        return "running"
    if states <= {JobStatus.COMPLETED}:
        return "completed"
    return "failed" if JobStatus.FAILED in states else "cancelled"
