"""Typed tasks: a payload annotated with a pydantic model, a dataclass or a TypedDict is
checked at enqueue (Python and HTTP) and at run (mypy's checks: unit/test_typed_tasks.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import date
from typing import Any, NotRequired, TypedDict

import asyncpg
import httpx
import pytest
from pydantic import BaseModel, Field

from jobqueue.app import JobQueue
from jobqueue.context import JobContext
from jobqueue.model.job import JobStatus
from jobqueue.task import PayloadError
from jobqueue.testing import assert_enqueued, drain

pytestmark = pytest.mark.anyio


class Email(BaseModel):
    to: str = Field(pattern=r".+@.+")
    subject: str = "Hello"
    send_on: date | None = None


@dataclasses.dataclass
class Invoice:
    number: int
    lines: list[str]


class Resize(TypedDict):  # typing's own, which pydantic refuses before Python 3.12
    path: str
    width: int
    height: NotRequired[int]


async def count(db: asyncpg.Connection, schema: str) -> int:
    n: int = await db.fetchval(f'SELECT count(*) FROM "{schema}".jobs')
    return n


async def test_pydantic_payload_checked_at_enqueue_and_given_as_the_model(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    received: list[Email] = []

    @jq.task("send_email")
    async def send_email(email: Email, ctx: JobContext) -> None:
        received.append(email)

    job = await send_email.enqueue_async(Email(to="a@example.com", send_on=date(2026, 12, 1)))
    # Stored as JSON with the defaults filled in: what the handler will be given.
    assert job.payload == {"to": "a@example.com", "subject": "Hello", "send_on": "2026-12-01"}
    by_name = await jq.enqueue("send_email", {"to": "b@example.com"})
    assert by_name.payload["subject"] == "Hello"

    with pytest.raises(PayloadError) as bad:
        await jq.enqueue("send_email", {"to": "nobody", "send_on": "soon"})
    assert [e["loc"] for e in bad.value.errors] == [("to",), ("send_on",)]
    assert "payload.to: String should match pattern" in str(bad.value)
    with pytest.raises(ValueError, match=r"payloads\[1\]: payload of 'send_email' is invalid"):
        await jq.enqueue_many("send_email", [{"to": "c@example.com"}, {}])
    assert await count(db, schema) == 2  # nothing of the bad calls was stored

    await assert_enqueued(jq, "send_email", payload=Email(to="b@example.com"), count=1)
    outcomes = await drain(jq)
    assert [j.status for j in outcomes] == [JobStatus.COMPLETED] * 2
    assert received == [
        Email(to="a@example.com", send_on=date(2026, 12, 1)),
        Email(to="b@example.com"),
    ]


async def test_dataclass_and_typeddict_payloads(jq: JobQueue) -> None:
    got: list[Any] = []

    @jq.task("invoice")
    def invoice(payload: Invoice) -> None:
        got.append(payload)

    @jq.task("resize")
    async def resize(payload: Resize) -> None:
        got.append(payload)

    await invoice.enqueue_async(Invoice(7, ["tea"]))
    await resize.enqueue_async({"path": "a.png", "width": 640})
    with pytest.raises(PayloadError, match=r"payload.number: Input should be a valid integer"):
        await jq.enqueue("invoice", {"number": "seven", "lines": []})
    with pytest.raises(PayloadError, match=r"payload.width: Field required"):
        await jq.enqueue("resize", {"path": "b.png"})
    # The sync API, from code without an event loop, checks the same way.
    job = await asyncio.to_thread(invoice.enqueue, Invoice(8, []), delay_seconds=0)
    assert job.payload == {"number": 8, "lines": []}
    with pytest.raises(PayloadError):
        await asyncio.to_thread(jq.enqueue_sync, "resize", {"path": 3, "width": 1})
    jq.close_sync()

    await drain(jq)
    assert got == [Invoice(7, ["tea"]), {"path": "a.png", "width": 640}, Invoice(8, [])]


async def test_a_stored_payload_that_no_longer_matches_fails_without_retry(
    jq: JobQueue, settings: Any
) -> None:
    # Jobs stored by an application that did not know the type (or an older version).
    old = JobQueue(settings=settings)
    job = await old.enqueue("send_email", {"address": "a@example.com"}, max_attempts=5)
    await old.close()
    ran = False

    @jq.task("send_email")
    async def send_email(email: Email) -> None:
        nonlocal ran
        ran = True

    [outcome] = await drain(jq)
    assert outcome.id == job.id
    assert (outcome.status, outcome.attempts, ran) == (JobStatus.FAILED, 1, False)
    assert outcome.last_error == (
        "discarded: payload of 'send_email' is invalid: payload.to: Field required"
    )


async def test_http_names_every_bad_payload_field_and_stores_nothing(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    from jobqueue.api import create_app

    @jq.task("send_email")
    async def send_email(email: Email) -> None:
        pass

    app = create_app(jq, check_types=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        bad = await client.post(
            "/jobs", json={"type": "send_email", "payload": {"to": "x", "subject": 3}}
        )
        batch = await client.post(
            "/jobs/batch",
            json={"jobs": [{"type": "send_email", "payload": {"to": "a@example.com"}},
                           {"type": "send_email", "payload": {}}]},
        )  # fmt: skip
        good = await client.post(
            "/jobs", json={"type": "send_email", "payload": {"to": "a@example.com"}}
        )
    assert bad.status_code == 422
    assert [(e["field"], e["type"]) for e in bad.json()["detail"]] == [
        ("payload.to", "string_pattern_mismatch"),
        ("payload.subject", "string_type"),
    ]
    assert batch.status_code == 422
    assert [e["field"] for e in batch.json()["detail"]] == ["jobs.1.payload.to"]
    assert good.status_code == 201
    assert good.json()["payload"] == {"to": "a@example.com", "subject": "Hello", "send_on": None}
    assert await count(db, schema) == 1


async def test_keyword_form_at_run_time(jq: JobQueue) -> None:
    @jq.task("send_email")
    async def send_email(email: Email) -> None:
        pass

    @jq.task("untyped")
    async def untyped(payload: dict[str, Any]) -> None:
        pass

    job = await send_email.enqueue_async(to="a@example.com", priority=3)
    assert (job.payload["to"], job.priority) == ("a@example.com", 3)
    assert (await untyped.enqueue_async(n=1)).payload == {"n": 1}
    with pytest.raises(PayloadError, match=r"payload\.to: Field required"):
        await send_email.enqueue_async(subject="no address")
    # A misspelt option is not taken for a payload field (pydantic would drop it).
    with pytest.raises(TypeError, match="'delay' is neither an option nor a field of Email"):
        await send_email.enqueue_async(to="a@example.com", delay=5)
    with pytest.raises(TypeError, match="not both"):
        await send_email.enqueue_async(Email(to="a@example.com"), subject="Hi")
