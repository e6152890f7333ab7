"""jobqueue.testing, as an application's test suite would use it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from jobqueue.app import JobQueue
from jobqueue.model.job import JobStatus
from jobqueue.testing import assert_enqueued, drain

pytestmark = pytest.mark.anyio


async def test_drain_runs_everything_due_with_the_real_handlers(jq: JobQueue) -> None:
    sent: list[str] = []

    @jq.task("send_email")
    async def send_email(payload: dict[str, Any]) -> None:
        sent.append(payload["to"])

    @jq.task("flaky", max_attempts=2)
    def flaky(payload: dict[str, Any]) -> None:
        raise RuntimeError("down")

    a = await jq.enqueue("send_email", {"to": "a@example.com"})
    b = await jq.enqueue("send_email", {"to": "b@example.com"})
    bad = await jq.enqueue("flaky")
    later = await jq.enqueue("send_email", {"to": "later@example.com"}, delay_seconds=3600)
    jq.settings = dataclasses.replace(jq.settings, retry_delay=0.0)  # retries fall due at once
    outcomes = {job.id: job for job in await drain(jq)}
    assert sent == ["a@example.com", "b@example.com"]
    assert outcomes[a.id].status == outcomes[b.id].status == JobStatus.COMPLETED
    assert (outcomes[bad.id].status, outcomes[bad.id].attempts) == (JobStatus.FAILED, 2)
    assert later.id not in outcomes  # not due: untouched
    assert await drain(jq) == []  # nothing left to do


async def test_assert_enqueued_matches_type_payload_keys_and_queue(jq: JobQueue) -> None:
    await jq.enqueue("send_email", {"to": "a@example.com", "template": "welcome"}, queue="mail")
    [job] = await assert_enqueued(jq, "send_email", payload={"to": "a@example.com"})
    assert job.queue == "mail"
    await assert_enqueued(jq, "send_email", queue="mail", count=1)
    with pytest.raises(AssertionError, match=r"found 0; pending: send_email .* in mail"):
        await assert_enqueued(jq, "send_email", payload={"to": "b@example.com"})
    with pytest.raises(AssertionError, match="expected 2 job"):
        await assert_enqueued(jq, "send_email", count=2)
    with pytest.raises(AssertionError, match="found 0"):
        await assert_enqueued(jq, "send_sms")


async def test_inline_runs_jobs_before_enqueue_returns_nested_ones_included(
    jq: JobQueue,
) -> None:
    from jobqueue.testing import inline

    order: list[str] = []

    @jq.task("signup")
    async def signup(payload: dict[str, Any]) -> None:
        order.append("signup")
        await jq.enqueue("welcome", {"to": payload["to"]})  # enqueued by a handler
        order.append("signup done")

    @jq.task("welcome")
    async def welcome(payload: dict[str, Any]) -> None:
        order.append(f"welcome {payload['to']}")

    async with inline(jq):
        job = await jq.enqueue("signup", {"to": "a@example.com"})
        assert job.status == JobStatus.COMPLETED
        assert order == ["signup", "signup done", "welcome a@example.com"]
        [bulk] = await jq.enqueue_many("welcome", [{"to": "b@example.com"}])
        assert (await jq.get(bulk)).status == JobStatus.COMPLETED  # type: ignore[union-attr]
    outside = await jq.enqueue("welcome", {"to": "c@example.com"})
    assert outside.status == JobStatus.PENDING  # the block is over: normal again
