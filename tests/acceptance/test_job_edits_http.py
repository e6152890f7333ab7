"""Job edits over real HTTP against a real `jobqueue api`: a pending job changed, made
due now and deleted; a running or ended one refused with its state named; a job a
worker takes while an edit waits for its row is refused, never half changed; bad input
a 422 naming the field with nothing changed; each edit one audit row."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import jobqueue

pytestmark = pytest.mark.anyio


async def enqueue(client: httpx.AsyncClient, **job: Any) -> dict[str, Any]:
    answer = await client.post("/jobs", json={"type": "resize", "queue": "images", **job})
    assert answer.status_code == 201, answer.text
    made: dict[str, Any] = answer.json()
    return made


async def test_a_pending_job_is_changed_run_now_and_deleted(
    base: str, db: asyncpg.Connection, schema: str
) -> None:
    async with httpx.AsyncClient(base_url=base) as client:
        job = await enqueue(client, payload={"w": 1}, delay_seconds=3600)
        changed = await client.patch(
            f"/jobs/{job['id']}",
            json={"priority": -5, "payload": {"w": 2}, "max_attempts": 7, "queue": "thumbs"},
        )
        assert changed.status_code == 200, changed.text
        shown = changed.json()
        assert (shown["priority"], shown["payload"], shown["max_attempts"], shown["queue"]) == (
            -5, {"w": 2}, 7, "thumbs",
        )  # fmt: skip
        assert shown["run_at"] == job["run_at"]  # a field left out is kept
        # Not due for an hour: no claim takes it; run now, and the next claim does.
        claim = {"worker": "w1", "queues": ["thumbs"], "wait_seconds": 0}
        assert (await client.post("/claims", json=claim)).json()["jobs"] == []
        due = await client.post(f"/jobs/{job['id']}/run-now")
        assert due.status_code == 200, due.text
        [claimed] = (await client.post("/claims", json=claim)).json()["jobs"]
        assert claimed["id"] == job["id"]
        # Running now: every edit is refused, naming the state.
        for refused in (
            await client.patch(f"/jobs/{job['id']}", json={"priority": 1}),
            await client.post(f"/jobs/{job['id']}/run-now"),
            await client.delete(f"/jobs/{job['id']}"),
        ):
            assert refused.status_code == 409, refused.text
            assert refused.json()["status"] == "running"
        assert "cancel it first" in refused.json()["detail"]

        other = await enqueue(client, unique_key="report-7")
        assert (await client.delete(f"/jobs/{other['id']}")).status_code == 204
        assert (await client.get(f"/jobs/{other['id']}")).status_code == 404
        # Its unique key is free again.
        again = await enqueue(client, unique_key="report-7")
        assert again["id"] != other["id"]
        assert (await client.delete("/jobs/999999")).status_code == 404

    audit = await db.fetch(
        f'SELECT action, target, result, filter FROM "{schema}".audit_log ORDER BY id'
    )
    assert [(r["action"], r["result"]) for r in audit] == [
        ("job.update", "ok"),
        ("job.run_now", "ok"),
        ("job.update", "conflict:running"),
        ("job.run_now", "conflict:running"),
        ("job.delete", "conflict:running"),
        ("job.delete", "ok"),
    ]
    assert json.loads(audit[0]["filter"]) == {
        "fields": ["max_attempts", "payload", "priority", "queue"]
    }


async def test_bad_edits_are_refused_naming_the_field_and_change_nothing(
    base: str, env: dict[str, str], tmp_path: Path
) -> None:
    schema_file = tmp_path / "crop.json"
    schema_file.write_text('{"type": "object", "properties": {"w": {"minimum": 1}}}')
    declared = jobqueue(env, "types", "add", "crop", "--payload-schema", str(schema_file))
    assert declared.returncode == 0, declared.stderr
    async with httpx.AsyncClient(base_url=base) as client:
        job = await enqueue(client, type="crop", payload={"w": 1}, delay_seconds=60)
        for body, field in [
            ({"colour": "red"}, "colour"),
            ({"priority": 2**40}, "priority"),
            ({"max_attempts": 0}, "max_attempts"),
            ({"run_at": "2026-12-01T10:00:00"}, "run_at"),  # no time zone
            ({"run_at": "2026-12-01T10:00:00Z", "delay_seconds": 5}, "run_at"),
            ({"delay_seconds": -1}, "delay_seconds"),
            ({"priority": None}, "priority"),
            ({"payload": [1]}, "payload"),
            ({"queue": "no spaces"}, "queue"),
            ({"payload": {"w": 0}}, "payload.w"),  # as its declared type's schema says
            ({}, "body"),
        ]:
            refused = await client.patch(f"/jobs/{job['id']}", json=body)
            assert refused.status_code == 422, (body, refused.text)
            assert refused.json()["detail"][0]["field"] == field, refused.text
        nan = await client.patch(
            f"/jobs/{job['id']}", content=b'{"payload": {"x": NaN}}',
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        assert nan.status_code == 422
        assert (await client.get(f"/jobs/{job['id']}")).json() == {
            **job, "steps": [], "waiting_for": None, "spawned_by": None, "children": None,
        }  # fmt: skip


async def test_a_job_taken_while_an_edit_waits_for_its_row_is_refused(
    base: str, pg_dsn: str, schema: str
) -> None:
    async with httpx.AsyncClient(base_url=base) as client:
        job = await enqueue(client, delay_seconds=60)
        conn = await asyncpg.connect(pg_dsn)
        try:
            # A worker's claim, holding the row until it commits.
            tx = conn.transaction()
            await tx.start()
            await conn.execute(
                f"UPDATE \"{schema}\".jobs SET status = 'running', attempts = 1, "
                "worker_id = 'w', lease_expires_at = now() + interval '30 seconds' WHERE id = $1",
                job["id"],
            )
            edit = asyncio.create_task(client.patch(f"/jobs/{job['id']}", json={"priority": 9}))
            deadline = asyncio.get_running_loop().time() + 10
            while not await waiting_for_a_lock(pg_dsn):
                assert asyncio.get_running_loop().time() < deadline, "the edit never waited"
                await asyncio.sleep(0.02)
            await tx.commit()
            refused = await edit
        finally:
            await conn.close()
        assert refused.status_code == 409, refused.text
        assert refused.json()["status"] == "running"
        assert (await client.get(f"/jobs/{job['id']}")).json()["priority"] == 0


async def waiting_for_a_lock(dsn: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        waiting: bool = await conn.fetchval(
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        )
        return waiting
    finally:
        await conn.close()


async def test_fifty_concurrent_debounces_over_http_leave_one_job_with_the_last_payload(
    base: str, db: asyncpg.Connection, schema: str
) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for mode, extra in (("debounce", {"delay_seconds": 5}), ("replace", {})):
            key = f"burst-{mode}"
            answers = await asyncio.gather(
                *(
                    client.post(
                        "/jobs",
                        json={
                            "type": "resize",
                            "payload": {"n": n},
                            "unique_key": key,
                            "on_conflict": mode,
                            **extra,
                        },
                    )
                    for n in range(50)
                )
            )
            assert sorted({a.status_code for a in answers}) == [200, 201]
            assert [a.status_code for a in answers].count(201) == 1
            rows = await db.fetch(
                f'SELECT id, payload FROM "{schema}".jobs WHERE unique_key = $1', key
            )
            assert len(rows) == 1
            last = max((a.json() for a in answers), key=lambda j: j["updated_at"])
            assert json.loads(rows[0]["payload"]) == last["payload"]
        refused = await client.post(
            "/jobs", json={"type": "resize", "unique_key": "k", "on_conflict": "debounce"}
        )
        assert refused.status_code == 422
        assert "debounce needs delay_seconds" in refused.text
