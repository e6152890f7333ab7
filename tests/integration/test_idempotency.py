"""Idempotency keys of POST /jobs against PostgreSQL: each caller's own, refused when
malformed, remembered past their job's end and its deletion, free again once expired
(with the store's clock), and independent of the job's unique_key. The behaviour over
a real server is in acceptance/test_idempotency.py."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from jobqueue.app import JobQueue
from jobqueue.enqueue.idempotency import IdempotencyKey
from jobqueue.enqueue.new_job import NewJob
from jobqueue.maintenance.expired_keys import IdempotencyExpiry

pytestmark = pytest.mark.anyio


async def count(db: asyncpg.Connection, schema: str, table: str = "jobs") -> int:
    return int(await db.fetchval(f'SELECT count(*) FROM "{schema}".{table}'))


def keyed(key: str, principal: str | None, ttl: float = 60.0) -> IdempotencyKey:
    return IdempotencyKey(key=key, principal=principal, request_hash=b"h", ttl_seconds=ttl)


async def test_two_callers_with_one_key_each_get_their_own_job(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    spec = NewJob(type="x")
    a, a_new = await jq.enqueue_job(spec, idempotency_key=keyed("k", "token-a"))
    b, b_new = await jq.enqueue_job(spec, idempotency_key=keyed("k", "token-b"))
    anon, anon_new = await jq.enqueue_job(spec, idempotency_key=keyed("k", None))
    assert (a_new, b_new, anon_new) == (True, True, True)
    assert len({a.id, b.id, anon.id}) == 3
    again, again_new = await jq.enqueue_job(spec, idempotency_key=keyed("k", None))
    assert (again.id, again_new) == (anon.id, False)
    assert await count(db, schema) == 3


async def test_an_expired_key_is_free_before_the_sweep_and_gone_after_it(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    store = await jq.store()
    store.clock.set(datetime(2026, 1, 1, tzinfo=UTC))
    spec = NewJob(type="x")
    first, _ = await jq.enqueue_job(spec, idempotency_key=keyed("k", None, ttl=60))
    store.clock.advance(59)
    assert (await jq.enqueue_job(spec, idempotency_key=keyed("k", None)))[0].id == first.id
    assert await IdempotencyExpiry(store).run_once() == 0
    store.clock.advance(2)
    second, created = await jq.enqueue_job(spec, idempotency_key=keyed("k", None, ttl=60))
    assert created
    assert second.id != first.id
    store.clock.advance(61)
    assert await IdempotencyExpiry(store).run_once() == 1
    assert await count(db, schema, "idempotency_keys") == 0


async def test_a_key_whose_job_was_deleted_is_a_410_naming_the_job(
    api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    headers = {"Idempotency-Key": '"order-1"'}
    first = await api_client.post("/jobs", json={"type": "x"}, headers=headers)
    assert first.status_code == 201
    await db.execute(f'DELETE FROM "{schema}".jobs')  # as retention does
    gone = await api_client.post("/jobs", json={"type": "x"}, headers=headers)
    assert gone.status_code == 410, gone.text
    assert gone.json()["job_id"] == first.json()["id"]
    assert "deleted" in gone.json()["detail"]
    assert await count(db, schema) == 0


async def test_the_key_and_the_unique_key_each_keep_their_meaning(
    api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    body = {"type": "x", "unique_key": "report:1"}
    first = await api_client.post("/jobs", json=body, headers={"Idempotency-Key": "a"})
    assert (first.status_code, first.json()["unique_key"]) == (201, "report:1")
    # Another key, the unique key held: the holder, and the new key remembers it.
    held = await api_client.post("/jobs", json=body, headers={"Idempotency-Key": "b"})
    assert (held.status_code, held.json()["id"]) == (200, first.json()["id"])
    await db.execute(f"UPDATE \"{schema}\".jobs SET status = 'cancelled', finished_at = now()")
    # The unique key is free once its job ended; the idempotency keys still answer.
    retry = await api_client.post("/jobs", json=body, headers={"Idempotency-Key": "a"})
    assert (retry.status_code, retry.json()["id"]) == (200, first.json()["id"])
    fresh = await api_client.post("/jobs", json=body, headers={"Idempotency-Key": "c"})
    assert fresh.status_code == 201
    assert fresh.json()["id"] != first.json()["id"]
    assert await count(db, schema) == 2


@pytest.mark.parametrize(
    ("header", "msg"),
    [
        ('"unclosed', "no closing quote"),
        ('"a"; p=1', "nothing may follow"),
        ('"a\\nb"', "escapes only"),
        ('""', "1 to 255 characters"),
        ("caf\u00e9", "printable ASCII"),
        ("k" * 256, "1 to 255 characters"),
    ],
)
async def test_a_malformed_key_is_a_422_naming_the_header_and_stores_nothing(
    api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str, header: str, msg: str
) -> None:
    r = await api_client.post(
        "/jobs", json={"type": "x"}, headers=[("Idempotency-Key", header.encode("latin-1"))]
    )
    assert r.status_code == 422, r.text
    [error] = r.json()["detail"]
    assert (error["field"], error["type"]) == ("Idempotency-Key", "idempotency_key_invalid")
    assert msg in error["msg"]
    assert await count(db, schema) == 0
    assert await count(db, schema, "idempotency_keys") == 0


async def test_a_quoted_key_with_escapes_is_the_same_key_as_its_bare_form(
    api_client: httpx.AsyncClient,
) -> None:
    quoted = await api_client.post(
        "/jobs", json={"type": "x"}, headers={"Idempotency-Key": '"a\\\\b"'}
    )
    bare = await api_client.post("/jobs", json={"type": "x"}, headers={"Idempotency-Key": "a\\b"})
    assert quoted.status_code == 201
    # A bare key may not hold a backslash: quote it.
    assert bare.status_code == 422
    same = await api_client.post(
        "/jobs", json={"type": "x"}, headers={"Idempotency-Key": '"a\\\\b"'}
    )
    assert (same.status_code, same.json()["id"]) == (200, quoted.json()["id"])
