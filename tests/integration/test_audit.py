"""The audit log: each control action, over HTTP or from the CLI, is one row with who,
what, on what, how many jobs, from where and the result, refusals included; GET /audit
and `jobqueue audit` read it newest first; retention deletes old rows."""

from __future__ import annotations

import getpass
import json
from typing import Any

import asyncpg
import httpx
import pytest

from jobqueue.api import create_app
from jobqueue.api.refusals import RefusalLog
from jobqueue.app import JobQueue
from jobqueue.audit import Actor
from jobqueue.auth.tokens import new_token
from jobqueue.db.sql import queries
from jobqueue.maintenance.leader import Leader
from jobqueue.maintenance.retention import Retention
from jobqueue.model.job import JobStatus
from tests.conftest import dead_letters, jobqueue

pytestmark = pytest.mark.anyio

DAY = 86400.0


async def audit_rows(db: asyncpg.Connection, schema: str) -> list[dict[str, Any]]:
    """Every row, oldest first, without its id and time."""
    rows = await db.fetch(
        f"""SELECT actor, action, target, filter::text AS filter, count, client, result
            FROM "{schema}".audit_log ORDER BY id"""
    )
    return [
        {**dict(r), "filter": None if r["filter"] is None else json.loads(r["filter"])}
        for r in rows
    ]


def row(action: str, **fields: Any) -> dict[str, Any]:
    """A row of an action over the open API, from the in-process client's address."""
    defaults = {"actor": "anonymous", "target": None, "filter": None, "count": None}
    return {**defaults, "client": "127.0.0.1", "result": "ok", "action": action, **fields}


async def test_each_control_action_over_http_is_one_row_with_its_result(
    jq: JobQueue, api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    [dead] = await dead_letters(db, schema, [("report", "default", 1)])
    pending = await jq.enqueue("report")

    assert (await api_client.post(f"/jobs/{dead}/retry")).status_code == 200
    assert (await api_client.post(f"/jobs/{pending.id}/retry")).status_code == 409
    assert (await api_client.post("/jobs/999999999/retry")).status_code == 404
    assert (await api_client.post(f"/jobs/{pending.id}/cancel")).status_code == 200
    assert (await api_client.post(f"/jobs/{pending.id}/cancel")).status_code == 200  # no-op
    assert (await api_client.post("/jobs/999999999/cancel")).status_code == 404
    assert (await api_client.post("/queues/mail/pause")).status_code == 200
    assert (await api_client.post("/queues/mail/resume")).status_code == 200

    assert await audit_rows(db, schema) == [
        row("job.retry", target=str(dead), count=1),
        row("job.retry", target=str(pending.id), count=0, result="conflict:pending"),
        row("job.retry", target="999999999", count=0, result="not_found"),
        row("job.cancel", target=str(pending.id), count=1),
        row("job.cancel", target=str(pending.id), count=0),
        row("job.cancel", target="999999999", count=0, result="not_found"),
        row("queue.pause", target="mail"),
        row("queue.resume", target="mail"),
    ]


async def test_a_cancel_too_late_records_the_conflict_with_the_state(
    api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    [done] = await db.fetch(
        f"""INSERT INTO "{schema}".jobs (type, status, attempts, finished_at)
            VALUES ('x', 'completed', 1, now()) RETURNING id"""
    )
    answer = await api_client.post(f"/jobs/{done['id']}/cancel")
    assert answer.status_code == 409
    assert await audit_rows(db, schema) == [
        row("job.cancel", target=str(done["id"]), count=0, result="conflict:completed")
    ]


async def test_a_bulk_action_is_one_row_counting_the_jobs_it_touched(
    jq: JobQueue, api_client: httpx.AsyncClient, db: asyncpg.Connection, schema: str
) -> None:
    await dead_letters(
        db,
        schema,
        [("mail", "a", 1), ("mail", "a", 2), ("mail", "a", 3), ("mail", "b", 1), ("sms", "a", 1)],
    )
    retried = await api_client.post("/jobs/retry", json={"type": "mail", "queue": "a"})
    assert retried.json() == {"retried": 3}
    cancelled = await api_client.post("/jobs/cancel", json={"queue": "a"})
    assert cancelled.json() == {"cancelled": 3, "requested": 0}
    nothing = await api_client.post("/jobs/retry", json={"type": "nosuch"})
    assert nothing.json() == {"retried": 0}

    statuses = ["cancelled", "failed"]
    assert await audit_rows(db, schema) == [
        row("jobs.retry", filter={"type": "mail", "queue": "a", "statuses": statuses}, count=3),
        row("jobs.cancel", filter={"queue": "a"}, count=3),
        row("jobs.retry", filter={"type": "nosuch", "statuses": statuses}, count=0),
    ]


async def test_a_bulk_action_in_many_batches_is_still_one_row(
    jq: JobQueue, db: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("jobqueue.control.BATCH", 2)
    await dead_letters(db, schema, [("mail", "a", h) for h in range(7)])
    by = Actor("ops", "10.0.0.7")
    assert await jq.retry_many(by=by) == 7
    assert await jq.cancel_many(by=by) == {"cancelled": 7, "requested": 0}
    rows = await audit_rows(db, schema)
    assert [(r["actor"], r["client"], r["action"], r["count"]) for r in rows] == [
        ("ops", "10.0.0.7", "jobs.retry", 7),
        ("ops", "10.0.0.7", "jobs.cancel", 7),
    ]


async def test_an_action_whose_row_cannot_be_written_is_undone(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    [dead] = await dead_letters(db, schema, [("report", "default", 1)])
    await db.execute(
        f'ALTER TABLE "{schema}".audit_log ADD CONSTRAINT refuse CHECK (false) NOT VALID'
    )
    with pytest.raises(asyncpg.CheckViolationError):
        await jq.retry(dead, by=Actor("ops"))
    job = await jq.get(dead)
    assert job is not None
    assert job.status == JobStatus.FAILED  # not retried: no unrecorded action
    with pytest.raises(asyncpg.CheckViolationError):
        await jq.pause("mail", by=Actor("ops"))
    assert not (await jq.queue("mail")).paused
    # From Python, without `by`, nothing is recorded and nothing is refused.
    assert (await jq.retry(dead)).status == JobStatus.PENDING


async def test_get_audit_pages_newest_first_and_filters(
    jq: JobQueue, api_client: httpx.AsyncClient
) -> None:
    for name in ("a", "b", "c"):
        await jq.pause(name, by=Actor("ops"))
    await jq.resume("a", by=Actor("cli:root"))
    await api_client.post("/queues/b/resume")

    page1 = (await api_client.get("/audit", params={"limit": 2})).json()
    assert [(e["action"], e["target"]) for e in page1["entries"]] == [
        ("queue.resume", "b"),
        ("queue.resume", "a"),
    ]
    page2 = await api_client.get("/audit", params={"limit": 2, "after": page1["next_after"]})
    page3 = await api_client.get("/audit", params={"limit": 2, "after": page2.json()["next_after"]})
    assert [e["target"] for e in page2.json()["entries"]] == ["c", "b"]
    assert [e["target"] for e in page3.json()["entries"]] == ["a"]
    assert page3.json()["next_after"] is None

    newest = page1["entries"][0]
    assert newest["actor"] == "anonymous"
    assert newest["client"] == "127.0.0.1"
    assert newest["result"] == "ok"
    assert newest["at"].endswith("Z") or "+00:00" in newest["at"]

    by_ops = (await api_client.get("/audit", params={"actor": "ops"})).json()["entries"]
    assert [e["target"] for e in by_ops] == ["c", "b", "a"]
    resumes = (await api_client.get("/audit", params={"action": "queue.resume"})).json()
    assert [e["actor"] for e in resumes["entries"]] == ["anonymous", "cli:root"]
    both = await api_client.get("/audit", params={"actor": "ops", "action": "queue.resume"})
    assert both.json() == {"entries": [], "next_after": None}


async def test_refused_requests_are_rows_at_most_one_per_token_and_route_a_window(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    store = await jq.store()
    secrets = {}
    for name, scopes, queues in (
        ("admin", ["admin"], None),
        ("reader", ["jobs:read"], None),
        ("mailer", ["jobs:enqueue", "queues:control"], ["mail"]),
    ):
        stored, secrets[name] = new_token(name=name, scopes=scopes, queues=queues)
        assert await store.token_create(token=stored, expires_in_seconds=None)
    app = create_app(jq, open_without_tokens=False, check_types=False)
    refusals: RefusalLog = app.state.refusals

    def bearer(name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {secrets[name]}"}

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        # A flood of one refusal: one row, counting every request once its window ends.
        for i in range(1, 31):
            answer = await client.post(f"/jobs/{i}/retry", headers=bearer("reader"))
            assert answer.status_code == 403
        # Refused for a queue, served by the lean POST /jobs and by a FastAPI route.
        for body in ({"type": "report"}, {"type": "report", "queue": "mail"}):
            answer = await client.post("/jobs", json=body, headers=bearer("mailer"))
            assert answer.status_code == (403 if "queue" not in body else 201)
        assert (
            await client.post("/queues/default/pause", headers=bearer("mailer"))
        ).status_code == 403
        # Neither a 401 nor an action the token may take is a refusal.
        assert (await client.post("/jobs/1/retry")).status_code == 401
        assert (await client.get("/jobs", headers=bearer("reader"))).status_code == 200

        refused = [
            {"actor": "reader", "action": "request.refused", "target": "POST /jobs/1/retry",
             "filter": None, "count": 1, "client": "127.0.0.1",
             "result": "forbidden:scope=jobs:control"},
            {"actor": "mailer", "action": "request.refused", "target": "POST /jobs",
             "filter": None, "count": 1, "client": "127.0.0.1",
             "result": "forbidden:queue=default"},
            {"actor": "mailer", "action": "request.refused",
             "target": "POST /queues/default/pause", "filter": None, "count": 1,
             "client": "127.0.0.1", "result": "forbidden:queue=default"},
        ]  # fmt: skip
        assert await audit_rows(db, schema) == refused
        await refusals.flush()  # the windows end: their counts are written
        refused[0]["count"] = 30
        assert await audit_rows(db, schema) == refused

        # Once a window has ended, the next refusal opens a row of its own.
        assert (await client.post("/jobs/7/retry", headers=bearer("reader"))).status_code == 403
        listed = await client.get("/audit", params={"actor": "reader"}, headers=bearer("admin"))
        assert [(e["target"], e["count"], e["result"]) for e in listed.json()["entries"]] == [
            ("POST /jobs/7/retry", 1, "forbidden:scope=jobs:control"),
            ("POST /jobs/1/retry", 30, "forbidden:scope=jobs:control"),
        ]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": 0}, "limit"), ({"limit": 501}, "limit"), ({"after": 0}, "after"),
     ({"action": "job.explode"}, "action")],
)  # fmt: skip
async def test_get_audit_refuses_bad_parameters_naming_them(
    api_client: httpx.AsyncClient, params: dict[str, object], field: str
) -> None:
    answer = await api_client.get("/audit", params=params)
    assert answer.status_code == 422
    assert [e["field"] for e in answer.json()["detail"]] == [field]


# -- the command line ----------------------------------------------------------------------


def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """``jobqueue ARGS``: its exit code, stdout and stderr."""
    done = jobqueue(env, *args)
    return done.returncode, done.stdout, done.stderr


async def test_cli_actions_are_recorded_as_the_os_user(
    env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    one, _ = await dead_letters(db, schema, [("mail", "a", 1), ("mail", "a", 2)])
    assert cli(env, "jobs", "retry", str(one))[0] == 0
    assert cli(env, "jobs", "retry", str(one))[0] == 1  # pending now: refused
    assert cli(env, "jobs", "retry", "--type", "mail")[0] == 0
    assert cli(env, "jobs", "cancel", "--all")[0] == 0
    assert cli(env, "queues", "pause", "mail")[0] == 0
    assert cli(env, "queues", "resume", "mail")[0] == 0

    code, out, _ = cli(env, "audit", "--json")
    assert code == 0
    user = f"cli:{getpass.getuser()}"
    entries = json.loads(out)
    assert [
        (e["actor"], e["action"], e["target"], e["filter"], e["count"], e["client"], e["result"])
        for e in entries
    ] == [
        (user, "queue.resume", "mail", None, None, None, "ok"),
        (user, "queue.pause", "mail", None, None, None, "ok"),
        (user, "jobs.cancel", None, {}, 2, None, "ok"),
        (user, "jobs.retry", None, {"type": "mail", "statuses": ["cancelled", "failed"]}, 1,
         None, "ok"),
        (user, "job.retry", str(one), None, 0, None, "conflict:pending"),
        (user, "job.retry", str(one), None, 1, None, "ok"),
    ]  # fmt: skip

    code, out, _ = cli(env, "audit", "--limit", "2", "--action", "queue.pause")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["ID", "AT", "ACTOR", "ACTION", "ON", "COUNT", "CLIENT", "RESULT"]
    assert len(lines) == 2
    assert lines[1].split()[3:] == [user, "queue.pause", "mail", "ok"]
    code, out, _ = cli(env, "audit", "--actor", "nobody")
    assert (code, out) == (0, "no audit rows\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--limit", "0"], "--limit must be from 1 to 500, got 0"),
     (["--action", "job.explode"], "--action must be one of job.retry, jobs.retry,")],
)  # fmt: skip
def test_cli_audit_bad_input_is_one_line_and_exit_2(
    env: dict[str, str], args: list[str], message: str
) -> None:
    code, out, err = cli(env, "audit", *args)
    assert code == 2
    assert out == ""
    assert err.startswith(f"jobqueue: error: {message}")
    assert err.count("\n") == 1


# -- retention ------------------------------------------------------------------------------


async def entries_aged(db: asyncpg.Connection, schema: str, days: list[float]) -> list[int]:
    return [
        await db.fetchval(
            f"""INSERT INTO "{schema}".audit_log (at, actor, action, target)
                VALUES (now() - make_interval(secs => $1), 'ops', 'queue.pause', 'mail')
                RETURNING id""",
            d * DAY,
        )
        for d in days
    ]


async def test_retention_deletes_audit_rows_past_their_time_in_batches(
    jq: JobQueue, db: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("jobqueue.maintenance.retention.BATCH", 3)
    monkeypatch.setattr("jobqueue.maintenance.retention.PAUSE_SECONDS", 0)
    ids = await entries_aged(db, schema, [200, 120, 91, 91, 91, 91, 89, 1])
    store = await jq.store()
    await Retention(
        store, retain_completed=DAY, retain_failed=DAY, retain_audit=90 * DAY
    ).run_once()
    left = [r["id"] for r in await db.fetch(f'SELECT id FROM "{schema}".audit_log ORDER BY id')]
    assert left == ids[-2:]
    # forever: nothing goes.
    await Retention(store, retain_completed=None, retain_failed=None, retain_audit=None).run_once()
    assert await db.fetchval(f'SELECT count(*) FROM "{schema}".audit_log') == 2


async def test_the_leader_deletes_old_audit_rows(
    jq: JobQueue, db: asyncpg.Connection, schema: str
) -> None:
    [old, recent] = await entries_aged(db, schema, [2, 0])
    leader = Leader(await jq.store(), "w1", lease_seconds=30, interval=1, retain_audit=DAY)
    await leader.run_once()
    assert leader.is_leader
    left = [r["id"] for r in await db.fetch(f'SELECT id FROM "{schema}".audit_log')]
    assert left == [recent]
    assert old not in left


async def test_the_audit_delete_and_listing_read_indexes_not_the_table(
    db: asyncpg.Connection, schema: str
) -> None:
    await db.execute(
        f"""INSERT INTO "{schema}".audit_log (at, actor, action)
            SELECT now() - make_interval(secs => g), 'ops', 'queue.pause'
            FROM generate_series(1, 20000) AS g"""
    )
    await db.execute(f'ANALYZE "{schema}".audit_log')
    q = queries(schema)
    delete = await db.fetch("EXPLAIN " + q.audit_expire, 90 * DAY, 1000, None)
    plan = "\n".join(r[0] for r in delete)
    assert "audit_log_at_idx" in plan, plan
    assert "Seq Scan on audit_log" not in plan, plan
    listing = await db.fetch("EXPLAIN " + q.audit_list, None, None, 15000, 50)
    plan = "\n".join(r[0] for r in listing)
    assert "audit_log_pkey" in plan, plan
    assert "Seq Scan" not in plan, plan
