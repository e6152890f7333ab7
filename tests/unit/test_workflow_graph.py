"""A workflow's graph is checked before anything is stored: each error names the job."""

from __future__ import annotations

import pytest

from jobqueue.workflows.model import Edge, WorkflowError, order


def check(*edges: tuple[str, tuple[str, ...]]) -> None:
    order([Edge(ref, after) for ref, after in edges])


def test_a_dag_passes() -> None:
    check(("a", ()), ("b", ("a",)), ("c", ("a",)), ("d", ("b", "c")))


@pytest.mark.parametrize(
    ("edges", "field", "message"),
    [
        ([("a", ("b",)), ("b", ("a",))], "jobs[0].depends_on",
         "cycle: a -> b -> a (each waits for the next)"),
        ([("a", ()), ("b", ("c",)), ("c", ("d",)), ("d", ("b",))], "jobs[1].depends_on",
         "cycle: b -> c -> d -> b (each waits for the next)"),
        ([("a", ("a",))], "jobs[0].depends_on", "cycle: a -> a (each waits for the next)"),
        ([("a", ()), ("b", ("nope",))], "jobs[1].depends_on", "unknown ref 'nope'"),
        ([("a", ()), ("a", ())], "jobs[1].ref", "ref 'a' is used twice"),
        ([("a", ()), ("b", ("a", "a"))], "jobs[1].depends_on", "a ref is given twice"),
        ([], "jobs", "a workflow needs at least one job"),
    ],
)  # fmt: skip
def test_each_error_names_the_job_at_fault(
    edges: list[tuple[str, tuple[str, ...]]], field: str, message: str
) -> None:
    with pytest.raises(WorkflowError) as raised:
        check(*edges)
    assert (raised.value.field, raised.value.message) == (field, message)


def test_a_job_behind_a_cycle_is_not_blamed_for_it() -> None:
    with pytest.raises(WorkflowError) as raised:
        check(("x", ("a",)), ("a", ("b",)), ("b", ("a",)))
    assert (raised.value.field, raised.value.loc) == (
        "jobs[1].depends_on",
        ["jobs", 1, "depends_on"],
    )
