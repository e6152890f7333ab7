"""Workers over HTTP against a real `jobqueue api` process: a claim hands out jobs with
leases, waits for one when nothing is due and is woken by its enqueue; complete and
fail end the attempt; a lease that lost its job (rescued and claimed again, or used
under another token) is refused with 409 and changes nothing; the scope and a token's
queues bound what may be claimed; bad input is a 422 naming the field; a client gone
mid-wait leaves no job claimed; the metrics count their outcomes as a worker's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobqueue.db.store import Store
from tests.acceptance import http_worker_support as support
from tests.acceptance.http_worker_support import auth, registered
from tests.acceptance.test_auth import make_token
from tests.acceptance.test_metrics import promtool_check_metrics
from tests.conftest import Process, Spawn

pytestmark = pytest.mark.anyio

WORK = ["jobs:work", "jobs:enqueue", "jobs:read", "payloads:read", "jobs:control"]


api = support.api  # a fixture


async def enqueue(client: httpx.AsyncClient, token: str, **job: Any) -> int:
    answer = await client.post("/jobs", json={"type": "resize", **job}, headers=auth(token))
    assert answer.status_code == 201, answer.text
    job_id: int = answer.json()["id"]
    return job_id


async def claim(client: httpx.AsyncClient, token: str, **order: Any) -> httpx.Response:
    body = {"worker": "w1", "queues": ["images"], **order}
    return await client.post("/claims", json=body, headers=auth(token))


async def test_a_claimed_job_completes_with_its_result(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "ts-worker", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, token, queue="images", payload={"path": "a.png"},
                               tags=["thumb"], meta={"user": 7})  # fmt: skip
        answer = await claim(client, token, max=10, types=["resize"])
        assert answer.status_code == 200, answer.text
        [job] = answer.json()["jobs"]
        assert (job["id"], job["type"], job["queue"], job["payload"]) == (
            job_id, "resize", "images", {"path": "a.png"}
        )  # fmt: skip
        assert (job["tags"], job["meta"]) == (["thumb"], {"user": 7})
        assert (job["attempt"], job["max_attempts"], job["parent_results"]) == (1, 3, None)
        workers = (await client.get("/workers", headers=auth(token))).json()
        [worker] = [w for w in workers if w["id"] == "http:ts-worker:w1"]
        assert (worker["queues"], worker["types"], worker["running"]) == (
            ["images"], ["resize"], 1
        )  # fmt: skip

        beat = await client.post(
            f"/jobs/{job_id}/heartbeat",
            json={"lease": job["lease"], "progress": {"fraction": 0.5, "message": "half"}},
            headers=auth(token),
        )
        assert beat.status_code == 200, beat.text
        assert beat.json()["cancel_requested"] is False
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert (shown["progress"]["fraction"], shown["progress"]["message"]) == (0.5, "half")

        done = await client.post(
            f"/jobs/{job_id}/complete",
            json={"lease": job["lease"], "result": {"width": 100}},
            headers=auth(token),
        )
        assert done.status_code == 200, done.text
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert (shown["status"], shown["result"]) == ("completed", {"width": 100})
        # Its lease ended with the job: a heartbeat is refused.
        late = await client.post(
            f"/jobs/{job_id}/heartbeat", json={"lease": job["lease"]}, headers=auth(token)
        )
        assert late.status_code == 409
        assert "nothing changed" in late.json()["detail"]


async def test_an_outcome_sent_again_is_answered_as_applied_and_changes_nothing(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    """A worker whose answer was lost sends its outcome again: it is answered as it
    was applied, the first result or error kept; once the job was rescued, the same
    outcome is a stale lease's, refused."""
    base, _ = api
    token = await make_token(db, schema, "resender", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        completed = await enqueue(client, token, queue="images")
        retried = await enqueue(client, token, queue="images", max_attempts=2)
        [done, failed] = (await claim(client, token, max=2)).json()["jobs"]
        first = {"lease": done["lease"], "result": {"n": 1}}
        again = {"lease": done["lease"], "result": {"n": 2}}
        for body in (first, again):
            answer = await client.post(
                f"/jobs/{completed}/complete", json=body, headers=auth(token)
            )
            assert (answer.status_code, answer.json()["status"]) == (200, "completed"), answer.text
        shown = (await client.get(f"/jobs/{completed}", headers=auth(token))).json()
        assert shown["result"] == {"n": 1}

        error = {"lease": failed["lease"], "error": {"type": "Boom"}, "retry_in_seconds": 60}
        answers = [
            await client.post(f"/jobs/{retried}/fail", json=error, headers=auth(token))
            for _ in range(2)
        ]
        assert [a.status_code for a in answers] == [200, 200]
        assert [a.json()["status"] for a in answers] == ["pending", "pending"]
        assert 58 < answers[1].json()["retry_in_seconds"] <= 60
        other = {**error, "error": {"type": "Other"}}
        not_this = await client.post(f"/jobs/{retried}/fail", json=other, headers=auth(token))
        assert not_this.status_code == 409  # not the outcome that was applied
        attempts = (await client.get(f"/jobs/{retried}/attempts", headers=auth(token))).json()
        assert [a["error"] for a in attempts["attempts"]] == ["Boom"]
        batch = {"outcomes": [first, error]}
        answer = await client.post("/outcomes", json=batch, headers=auth(token))
        assert [(o["ok"], o["status"]) for o in answer.json()["outcomes"]] == [
            (True, "completed"),
            (True, "pending"),
        ]

        # A job rescued after its lease lapsed: that lease's outcome was never applied.
        rescued = await enqueue(client, token, queue="images")
        [lapsed] = (await claim(client, token)).json()["jobs"]
        await db.execute(
            f"UPDATE \"{schema}\".jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1",
            rescued,
        )
        assert [r.id for r in await Store(db, schema).rescue(limit=10)] == [rescued]
        for path, body in (
            ("complete", {"lease": lapsed["lease"]}),
            ("fail", {"lease": lapsed["lease"], "error": {"type": "Late"}}),
        ):
            late = await client.post(f"/jobs/{rescued}/{path}", json=body, headers=auth(token))
            assert late.status_code == 409, (path, late.text)


async def test_a_waiting_claim_is_woken_by_an_enqueue_and_one_with_nothing_due_ends_empty(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "waiter", WORK)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        empty = await claim(client, token, wait_seconds=0.3)
        assert empty.status_code == 200
        assert empty.json() == {"jobs": [], "outcomes": []}

        started = time.monotonic()
        waiting = asyncio.create_task(claim(client, token, wait_seconds=30))
        await registered(client, token, "http:waiter:w1")  # the claim is waiting
        job_id = await enqueue(client, token, queue="images")
        answer = await waiting
        # Answered once the job was due, far before the 30 s the claim would wait.
        assert time.monotonic() - started < 15
        assert [j["id"] for j in answer.json()["jobs"]] == [job_id]


async def test_a_failed_attempt_is_retried_then_fails_for_good(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "failer", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, token, queue="images", max_attempts=3)
        [job] = (await claim(client, token)).json()["jobs"]
        error = {"type": "ResizeError", "message": "too wide", "traceback": "at resize.ts:3"}
        failed = await client.post(
            f"/jobs/{job_id}/fail",
            json={"lease": job["lease"], "error": error, "retry_in_seconds": 0},
            headers=auth(token),
        )
        assert failed.status_code == 200, failed.text
        assert failed.json() == {"id": job_id, "status": "pending", "retry_in_seconds": 0.0}

        [job] = (await claim(client, token)).json()["jobs"]
        assert job["attempt"] == 2
        discarded = await client.post(
            f"/jobs/{job_id}/fail",
            json={"lease": job["lease"], "error": {"type": "Fatal"}, "discard": True},
            headers=auth(token),
        )
        assert discarded.json() == {"id": job_id, "status": "failed", "retry_in_seconds": None}
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert (shown["status"], shown["last_error"]) == ("failed", "Fatal")
        attempts = (await client.get(f"/jobs/{job_id}/attempts", headers=auth(token))).json()
        assert [a["error"] for a in attempts["attempts"]] == ["ResizeError: too wide", "Fatal"]
        assert attempts["attempts"][0]["traceback"] == "at resize.ts:3"


async def test_a_lease_that_lost_its_job_changes_nothing(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    first = await make_token(db, schema, "first", WORK)
    second = await make_token(db, schema, "second", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, first, queue="images")
        [stale] = (await claim(client, first)).json()["jobs"]

        # Another token's write with the lease names another worker: fenced out.
        stolen = await client.post(
            f"/jobs/{job_id}/complete", json={"lease": stale["lease"]}, headers=auth(second)
        )
        assert stolen.status_code == 409

        # The lease runs out; the rescuer hands the job to another worker.
        await db.execute(
            f"UPDATE \"{schema}\".jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1",
            job_id,
        )
        assert [r.id for r in await Store(db, schema).rescue(limit=10)] == [job_id]
        [fresh] = (await claim(client, second, worker="w2")).json()["jobs"]
        assert (fresh["id"], fresh["attempt"]) == (job_id, 2)

        for path, body in (
            ("heartbeat", {"lease": stale["lease"]}),
            ("complete", {"lease": stale["lease"], "result": "late"}),
            ("fail", {"lease": stale["lease"], "error": {"type": "Late"}}),
        ):
            late = await client.post(f"/jobs/{job_id}/{path}", json=body, headers=auth(first))
            assert late.status_code == 409, (path, late.text)
        done = await client.post(
            f"/jobs/{job_id}/complete",
            json={"lease": fresh["lease"], "result": "second's"},
            headers=auth(second),
        )
        assert done.status_code == 200
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(first))).json()
        assert (shown["status"], shown["result"]) == ("completed", "second's")


async def test_the_scope_and_a_tokens_queues_bound_a_claim(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    admin = await make_token(db, schema, "admin", ["admin"])
    reader = await make_token(db, schema, "reader", ["jobs:read", "jobs:enqueue"])
    images = await make_token(db, schema, "images-only", WORK, queues=["images"])
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, admin, queue="mail")
        assert (await claim(client, reader, queues=["mail"])).status_code == 403
        refused = await claim(client, images, queues=["mail"])
        assert refused.status_code == 403
        assert "mail" in refused.json()["detail"]
        assert (await claim(client, images, queues=["images"])).json() == {
            "jobs": [],
            "outcomes": [],
        }
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(admin))).json()
        assert (shown["status"], shown["attempts"]) == ("pending", 0)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"worker": "w1", "max": 0}, "max"),
        ({"worker": "w1", "max": 101}, "max"),
        ({"worker": "w1", "wait_seconds": 61}, "wait_seconds"),
        ({"worker": "w1", "lease_seconds": 0}, "lease_seconds"),
        ({"worker": "w1", "queues": ["no spaces"]}, "queues.0"),
        ({"worker": "not a name"}, "worker"),
        ({}, "worker"),
    ],
)
async def test_a_bad_claim_is_a_422_naming_the_field(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str, body: Any, field: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "bad-claims", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        answer = await client.post("/claims", json=body, headers=auth(token))
        assert answer.status_code == 422, answer.text
        assert field in [d["field"] for d in answer.json()["detail"]]


async def test_a_bad_write_is_a_422_naming_the_field_and_stores_nothing(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "bad-writes", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, token, queue="images")
        [job] = (await claim(client, token)).json()["jobs"]
        cases: list[tuple[str, Any, str]] = [
            ("complete", {"lease": "not-a-lease"}, "lease"),
            ("complete", {"lease": job["lease"].replace(f"{job_id}.", "99999.", 1)}, "lease"),
            ("fail", {"lease": job["lease"]}, "error"),
            ("fail", {"lease": job["lease"], "error": {"type": ""}}, "error.type"),
            (
                "heartbeat",
                {"lease": job["lease"], "progress": {"fraction": 2}},
                "progress.fraction",
            ),
        ]
        for path, body, field in cases:
            answer = await client.post(f"/jobs/{job_id}/{path}", json=body, headers=auth(token))
            assert answer.status_code == 422, (path, body, answer.text)
            assert field in [d["field"] for d in answer.json()["detail"]], (path, answer.text)
        # A result JSON allows but PostgreSQL cannot store.
        raw = f'{{"lease": "{job["lease"]}", "result": NaN}}'
        answer = await client.post(
            f"/jobs/{job_id}/complete",
            content=raw,
            headers={**auth(token), "Content-Type": "application/json"},
        )
        assert answer.status_code == 422, answer.text
        assert "result" in [d["field"] for d in answer.json()["detail"]]
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert (shown["status"], shown["result"]) == ("running", None)


async def test_a_client_gone_mid_wait_leaves_no_job_claimed(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, server = api
    token = await make_token(db, schema, "leaver", WORK)
    async with httpx.AsyncClient(base_url=base, timeout=1.0) as client:
        with pytest.raises(httpx.ReadTimeout):
            await claim(client, token, wait_seconds=20)
    async with httpx.AsyncClient(base_url=base) as client:
        # Enqueued as the abandoned claim still waits (it looks for its client once a
        # second): it either claims the job, finds its client gone and hands it back,
        # or finds its client gone first. Either way it ends, and says so.
        job_id = await enqueue(client, token, queue="images")
        server.wait_for_output("claim abandoned")
        row = await db.fetchrow(
            f'SELECT status, attempts, worker_id FROM "{schema}".jobs WHERE id = $1', job_id
        )
        assert dict(row.items()) == {"status": "pending", "attempts": 0, "worker_id": None}
        # And a worker still gets it.
        [job] = (await claim(client, token)).json()["jobs"]
        assert (job["id"], job["attempt"]) == (job_id, 1)


async def test_batches_renew_and_end_many_jobs_each_answered(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "batcher", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        ids = [await enqueue(client, token, queue="images", max_attempts=2) for _ in range(4)]
        jobs = (await claim(client, token, max=4)).json()["jobs"]
        assert sorted(j["id"] for j in jobs) == ids
        leases = {j["id"]: j["lease"] for j in jobs}
        await client.post(f"/jobs/{ids[3]}/cancel", headers=auth(token))
        # One lease loses its job: rescued after its lease ran out.
        await db.execute(
            f"UPDATE \"{schema}\".jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1",
            ids[0],
        )
        await Store(db, schema).rescue(limit=10)

        beats = await client.post(
            "/heartbeats", json={"leases": [leases[i] for i in ids]}, headers=auth(token)
        )
        assert beats.status_code == 200, beats.text
        answered = beats.json()["leases"]
        assert [(b["ok"], b["cancel_requested"]) for b in answered] == [
            (False, False), (True, False), (True, False), (True, True)
        ]  # fmt: skip
        assert [b["lease"] for b in answered] == [leases[i] for i in ids]

        ended = await client.post(
            "/outcomes",
            json={"outcomes": [
                {"lease": leases[ids[0]], "result": "late"},
                {"lease": leases[ids[1]], "result": {"n": 1}},
                {"lease": leases[ids[2]], "error": {"type": "Boom"}, "retry_in_seconds": 0},
                {"lease": leases[ids[3]], "error": {"type": "Stopped"}},
            ]},
            headers=auth(token),
        )  # fmt: skip
        assert ended.status_code == 200, ended.text
        assert [(o["id"], o["ok"], o["status"]) for o in ended.json()["outcomes"]] == [
            (ids[0], False, None), (ids[1], True, "completed"), (ids[2], True, "pending"),
            (ids[3], True, "cancelled"),
        ]  # fmt: skip
        states = {
            r["id"]: (r["status"], r["result"])
            for r in await db.fetch(
                f'SELECT id, status, result::text FROM "{schema}".jobs ORDER BY id'
            )
        }
        assert states == {
            ids[0]: ("pending", None),  # rescued; the late outcome changed nothing
            ids[1]: ("completed", '{"n": 1}'),
            ids[2]: ("pending", None),  # retried
            ids[3]: ("cancelled", None),  # asked to stop: never retried
        }


async def test_a_claim_carries_the_outcomes_of_the_batch_before_it(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    """One request per batch: the outcomes go with the next claim, are applied while it
    is made, and are answered in order beside the jobs."""
    base, _ = api
    token = await make_token(db, schema, "carrier", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        ids = [await enqueue(client, token, queue="images") for _ in range(3)]
        first = (await claim(client, token, max=2)).json()
        assert (first["outcomes"], [j["id"] for j in first["jobs"]]) == ([], ids[:2])
        leases = [j["lease"] for j in first["jobs"]]
        stale = f"{ids[2]}.1.w1"  # a lease no claim handed out (its job is pending)
        carried = [
            {"lease": leases[0], "result": {"n": 1}},
            {"lease": leases[1], "error": {"type": "Boom"}, "discard": True},
            {"lease": stale, "result": "late"},
        ]
        # A bad outcome refuses the whole claim, as POST /outcomes would, and claims
        # nothing.
        bad = await claim(client, token, max=2, outcomes=[*carried, {"lease": "nope"}])
        assert bad.status_code == 422, bad.text
        assert "outcomes.3.lease" in [d["field"] for d in bad.json()["detail"]], bad.text
        running = await db.fetchval(
            f"SELECT count(*) FROM \"{schema}\".jobs WHERE status = 'running'"
        )
        assert running == 2

        second = await claim(client, token, max=2, outcomes=carried)
        assert second.status_code == 200, second.text
        answer = second.json()
        assert [(o["id"], o["ok"], o["status"]) for o in answer["outcomes"]] == [
            (ids[0], True, "completed"), (ids[1], True, "failed"), (ids[2], False, None)
        ]  # fmt: skip
        assert [j["id"] for j in answer["jobs"]] == [ids[2]]
        # Sent again (its answer lost): answered as applied, nothing changed.
        again = await claim(client, token, max=2, outcomes=carried[:1])
        assert [(o["ok"], o["status"]) for o in again.json()["outcomes"]] == [(True, "completed")]
        states = {
            r["id"]: (r["status"], r["result"], r["last_error"])
            for r in await db.fetch(
                f'SELECT id, status, result::text, last_error FROM "{schema}".jobs'
            )
        }
        assert states == {
            ids[0]: ("completed", '{"n": 1}', None),
            ids[1]: ("failed", None, "Boom"),
            ids[2]: ("running", None, None),
        }


async def test_log_lines_are_kept_with_the_attempt_up_to_the_bound(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    server = spawn(["api"], dict(env, JOBQUEUE_JOB_LOG_BYTES="1024"), name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    token = await make_token(db, schema, "logger", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, token, queue="images")
        [job] = (await claim(client, token)).json()["jobs"]
        path = f"/jobs/{job_id}/logs"
        first = await client.post(
            path, json={"lease": job["lease"], "lines": ["resizing a.png", "é ok"]},
            headers=auth(token),
        )  # fmt: skip
        assert first.json() == {"truncated": False}
        full = await client.post(
            path, json={"lease": job["lease"], "lines": ["x" * 2000]}, headers=auth(token)
        )
        assert full.json() == {"truncated": True}
        dropped = await client.post(
            path, json={"lease": job["lease"], "lines": ["after the bound"]}, headers=auth(token)
        )
        assert dropped.json() == {"truncated": True}
        attempts = (await client.get(f"/jobs/{job_id}/attempts", headers=auth(token))).json()
        [attempt] = attempts["attempts"]
        log = attempt["log"]
        assert log.splitlines()[0].endswith(" info resizing a.png")
        assert log.splitlines()[1].endswith(" info é ok")
        assert log.endswith("log truncated: more than 1024 bytes (JOBQUEUE_JOB_LOG_BYTES)\n")
        assert "after the bound" not in log
        assert attempt["log_truncated"] is True
        assert len(log.encode()) <= 1024 + 100  # the bound, and its marker line

        await client.post(
            f"/jobs/{job_id}/complete", json={"lease": job["lease"]}, headers=auth(token)
        )
        late = await client.post(
            path, json={"lease": job["lease"], "lines": ["late"]}, headers=auth(token)
        )
        assert late.status_code == 409


async def test_a_waiting_claim_answers_at_once_when_the_api_stops(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, server = api
    token = await make_token(db, schema, "stopper", WORK)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        waiting = asyncio.create_task(claim(client, token, wait_seconds=30))
        await registered(client, token, "http:stopper:w1")
        started = time.monotonic()
        stopping = asyncio.get_running_loop().run_in_executor(None, server.stop)
        answer = await waiting
        assert (answer.status_code, answer.json()) == (200, {"jobs": [], "outcomes": []})
        assert await stopping == 0
        # Its client claims again elsewhere at once, rather than after the 30 s wait or
        # the server's shutdown grace (which would have cut it off with a 500).
        assert time.monotonic() - started < 15


async def test_the_metrics_count_http_workers_outcomes_as_a_workers(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "counted", [*WORK, "metrics:read"])
    async with httpx.AsyncClient(base_url=base) as client:
        for _ in range(3):
            await enqueue(client, token, queue="images", max_attempts=1)
        jobs = (await claim(client, token, max=3, types=["resize"])).json()["jobs"]
        outcomes = [
            {"lease": jobs[0]["lease"], "result": 1},
            {"lease": jobs[1]["lease"], "result": 2},
            {"lease": jobs[2]["lease"], "error": {"type": "Boom"}},
        ]
        await client.post("/outcomes", json={"outcomes": outcomes}, headers=auth(token))
        labels = {"queue": "images", "type": "resize"}
        deadline = time.monotonic() + 20
        while True:  # the metrics add ended attempts up four times a second
            text = (await client.get("/metrics", headers=auth(token))).text
            finished = {
                s.labels["outcome"]: s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name == "jobqueue_jobs_finished_total" and labels.items() <= s.labels.items()
            }
            if finished or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert finished == {"completed": 2.0, "failed": 1.0}
        durations = [
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "jobqueue_job_duration_seconds_count"
            and labels.items() <= s.labels.items()
        ]
        assert durations == [3.0]
        promtool_check_metrics(text)


async def test_a_released_job_is_pending_again_its_attempt_not_counted(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "releaser", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, token, queue="images", max_attempts=1)
        [job] = (await claim(client, token)).json()["jobs"]
        released = await client.post(
            f"/jobs/{job_id}/release", json={"lease": job["lease"]}, headers=auth(token)
        )
        assert released.json() == {"id": job_id, "status": "pending", "retry_in_seconds": None}
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert (shown["status"], shown["attempts"]) == ("pending", 0)
        # Its only attempt is still to come.
        [again] = (await claim(client, token)).json()["jobs"]
        assert (again["id"], again["attempt"]) == (job_id, 1)
        stale = await client.post(
            f"/jobs/{job_id}/release", json={"lease": job["lease"]}, headers=auth(token)
        )
        assert stale.status_code == 409


async def test_a_job_asked_to_stop_ends_cancelled_whatever_its_worker_reports(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "stopped", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, token, queue="images")
        [job] = (await claim(client, token)).json()["jobs"]
        asked = await client.post(f"/jobs/{job_id}/cancel", headers=auth(token))
        assert asked.status_code == 202
        done = await client.post(
            f"/jobs/{job_id}/complete",
            json={"lease": job["lease"], "result": "finished anyway"},
            headers=auth(token),
        )
        assert done.json() == {"id": job_id, "status": "cancelled", "retry_in_seconds": None}
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert (shown["status"], shown["result"], shown["last_error"]) == (
            "cancelled", None, "cancelled while running"
        )  # fmt: skip


async def test_an_api_that_stands_for_maintenance_rescues_lapsed_leases(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    """With only `jobqueue api` and HTTP workers, JOBQUEUE_API_MAINTENANCE has the API
    rescue a dead worker's jobs, as a worker process's leader would."""
    settings = {"JOBQUEUE_API_MAINTENANCE": "on", "JOBQUEUE_RESCUE_INTERVAL": "0.2"}
    server = spawn(["api"], dict(env, **settings), name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    token = await make_token(db, schema, "lapsed", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, token, queue="images")
        [job] = (await claim(client, token, lease_seconds=1)).json()["jobs"]
        deadline = time.monotonic() + 30
        shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        while shown["status"] == "running":  # its worker "died": no heartbeat comes
            assert time.monotonic() < deadline, "never rescued"
            await asyncio.sleep(0.1)
            shown = (await client.get(f"/jobs/{job_id}", headers=auth(token))).json()
        assert (shown["status"], shown["last_error"]) == (
            "pending", "worker lost (lease expired)"
        )  # fmt: skip
        late = await client.post(
            f"/jobs/{job_id}/complete", json={"lease": job["lease"]}, headers=auth(token)
        )
        assert late.status_code == 409
        [again] = (await claim(client, token, worker="w2")).json()["jobs"]
        assert (again["id"], again["attempt"]) == (job_id, 2)
    assert server.stop() == 0


async def test_a_snoozed_job_runs_again_later_its_attempt_not_counted(
    api: tuple[str, Process], db: asyncpg.Connection, schema: str
) -> None:
    base, _ = api
    token = await make_token(db, schema, "snoozer", WORK)
    async with httpx.AsyncClient(base_url=base) as client:
        job_id = await enqueue(client, token, queue="images", max_attempts=1)
        [job] = (await claim(client, token)).json()["jobs"]
        snoozed = await client.post(
            f"/jobs/{job_id}/snooze", json={"lease": job["lease"], "seconds": 0.3},
            headers=auth(token),
        )  # fmt: skip
        assert snoozed.json() == {"id": job_id, "status": "pending", "retry_in_seconds": 0.3}
        assert (await claim(client, token, wait_seconds=0)).json()["jobs"] == []  # not yet
        # Due after its snooze, as the same attempt: the one attempt allowed is still to come.
        [again] = (await claim(client, token, wait_seconds=5)).json()["jobs"]
        assert (again["id"], again["attempt"]) == (job_id, 1)
        # A snooze in a batch of outcomes, and one that also carries an error: refused.
        batch = {"outcomes": [{"lease": again["lease"], "snooze_seconds": 3600}]}
        answered = await client.post("/outcomes", json=batch, headers=auth(token))
        [outcome] = answered.json()["outcomes"]
        assert (outcome["ok"], outcome["status"], outcome["retry_in_seconds"]) == (
            True, "pending", 3600,
        )  # fmt: skip
        bad = {"outcomes": [{"lease": again["lease"], "snooze_seconds": 1,
                             "error": {"type": "E"}}]}  # fmt: skip
        refused = await client.post("/outcomes", json=bad, headers=auth(token))
        assert refused.status_code == 422
        assert "a snooze has no result or error" in refused.text
        attempts = (await client.get(f"/jobs/{job_id}/attempts", headers=auth(token))).json()
        assert [a["error"][:11] for a in attempts["attempts"]] == ["snoozed for"] * 2
