"""From nodes to rows: what creating a workflow stores, checked before anything is."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jobqueue.db.records import JobRow, NodeState
from jobqueue.workflows.model import Edge, OnFailure, RunIf, WorkflowError, order


@dataclasses.dataclass(frozen=True, slots=True)
class Planned:
    """One job of a workflow about to be stored."""

    row: JobRow
    node: NodeState
    depends_on: tuple[str, ...]
    unique_key: str | None = None
    unique_for: float | None = None


def planned(
    row: JobRow,
    *,
    ref: str,
    depends_on: Sequence[str],
    on_failure: OnFailure,
    run_if: RunIf,
    unique_key: str | None = None,
    unique_for: float | None = None,
) -> Planned:
    status = "blocked" if depends_on else "pending"
    node = NodeState(ref, status, len(depends_on), on_failure, run_if)
    return Planned(row, node, tuple(depends_on), unique_key, unique_for)


def check(jobs: Sequence[Planned]) -> None:
    """Unique refs, known dependencies, no cycle; a node that can only run after a
    failure needs a parent (WorkflowError naming the field)."""
    order([Edge(p.node.ref, p.depends_on) for p in jobs])
    for i, p in enumerate(jobs):
        if p.node.run_if != "completed" and not p.depends_on:
            raise WorkflowError(f"jobs[{i}].run_if", f"{p.node.run_if!r} needs depends_on")
