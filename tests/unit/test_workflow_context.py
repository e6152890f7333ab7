"""What a workflow job's handler and its log lines know of the workflow."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from jobqueue.db.records import ClaimedJob, ParentResult
from jobqueue.observability.lifecycle import attempt_fields
from jobqueue.worker.executor import context_of

NOW = datetime.now(UTC)
IN_WORKFLOW = ClaimedJob(7, "load", "default", {}, 1, 3, 0, NOW, None, 42)
ALONE = ClaimedJob(8, "load", "default", {}, 1, 3, 0, NOW)


def test_the_attempt_events_name_the_workflow_of_a_workflow_job_only() -> None:
    assert attempt_fields(IN_WORKFLOW, "w", NOW)["workflow_id"] == 42
    assert "workflow_id" not in attempt_fields(ALONE, "w", NOW)


def test_ctx_log_lines_carry_the_workflow(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "jobqueue.job"):
        context_of(IN_WORKFLOW).log.info("loading")
        context_of(ALONE).log.info("alone")
    loading, alone = (r.getMessage() for r in caplog.records)
    assert loading.startswith("loading ")
    assert "workflow_id=42" in loading
    assert alone.startswith("alone ")
    assert "workflow_id" not in alone


def test_parent_results_by_ref_and_the_only_parents_result() -> None:
    one = context_of(IN_WORKFLOW, parents=[ParentResult("extract", "completed", [1, 2])])
    assert (one.workflow_id, one.parent_result, one.failed_parents) == (42, [1, 2], ())
    two = context_of(
        IN_WORKFLOW, parents=[ParentResult("b", "completed", 1), ParentResult("c", "failed", None)]
    )
    assert two.parent_results == {"b": 1, "c": None}
    assert two.failed_parents == ("c",)
    with pytest.raises(ValueError, match="has 2 parents; read parent_results"):
        _ = two.parent_result
    assert context_of(ALONE).parent_results == {}
