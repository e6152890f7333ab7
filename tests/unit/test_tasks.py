"""Task registration: every option is checked when the task is declared, before any job
exists, and a mistake names the option."""

from __future__ import annotations

from typing import Any

import pytest

from jobqueue.app import JobQueue, Task


def test_task_registration_rejects_duplicates() -> None:
    jq = JobQueue(dsn="postgresql://unused")
    jq.task("dup")(lambda payload: None)
    with pytest.raises(ValueError, match="already registered"):
        jq.task("dup")(lambda payload: None)
    assert isinstance(jq.tasks["dup"], Task)


def test_task_timeout_must_be_positive() -> None:
    jq = JobQueue(dsn="postgresql://unused")
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        jq.task("t", timeout=0)


def test_isolation_is_for_sync_handlers() -> None:
    jq = JobQueue(dsn="postgresql://unused")
    with pytest.raises(ValueError, match="isolated=True is for sync handlers"):

        @jq.task("a", isolated=True)
        async def a(payload: dict[str, Any]) -> None:
            pass


def test_task_options_are_checked_at_registration() -> None:
    jq = JobQueue(dsn="postgresql://unused")
    with pytest.raises(ValueError, match=r"^queue: "):
        jq.task("a", queue="no spaces allowed")
    with pytest.raises(ValueError, match=r"^max_attempts: "):
        jq.task("a", max_attempts=0)
    with pytest.raises(ValueError, match=r"^type: "):
        jq.task("")
    jq.task(" padded ")(lambda payload: None)
    assert list(jq.tasks) == ["padded"]
