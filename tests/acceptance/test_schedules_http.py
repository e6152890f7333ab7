"""Schedules as data over real HTTP, against real `jobqueue serve` processes: each tick
enqueued once across two of them, a change made on one seen by the other within a
second, bad input refused naming its field with nothing stored, schedules declared in
code read-only but for pausing, and tokens' scopes and reach."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
import httpx

from tests.conftest import Spawn, free_ports, jobqueue


async def fetch(dsn: str, query: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query))
    finally:
        await conn.close()


def rows(dsn: str, query: str) -> list[asyncpg.Record]:
    return asyncio.run(fetch(dsn, query))


def wait_until(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.05)


def test_ticks_are_enqueued_once_across_two_serve_processes_and_changes_reach_both(
    spawn: Spawn, env: dict[str, str], pg_dsn: str, schema: str
) -> None:
    ports = free_ports(2, besides=int(env["PORT"]))
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    # A short rescue interval: the second process takes the lead soon after the first
    # is stopped, and a schedule changed through one is ticked by the other.
    servers = [
        spawn(["serve", "--port", str(p)], {**env, "JOBQUEUE_RESCUE_INTERVAL": "0.5"},
              name=f"serve{i}")
        for i, p in enumerate(ports)
    ]  # fmt: skip
    for server, url in zip(servers, urls, strict=True):
        server.wait_http(url)
    made = httpx.post(
        f"{urls[0]}/schedules",
        json={"name": "every-second", "type": "noop", "every": "1s", "payload": {"n": 1}},
    )
    assert made.status_code == 201, made.text
    first_tick = datetime.fromisoformat(made.json()["next_run_at"])

    def ticked() -> list[asyncpg.Record]:
        return rows(pg_dsn, f'SELECT run_at, payload FROM "{schema}".jobs ORDER BY run_at')

    wait_until(lambda: len(ticked()) >= 4, 15, "four ticks")
    # Changed through the second process: the one that leads sees it within a second.
    changed = httpx.patch(f"{urls[1]}/schedules/every-second", json={"payload": {"n": 2}})
    assert changed.status_code == 200, changed.text
    changed_at = time.monotonic()
    wait_until(lambda: '"n": 2' in str(ticked()[-1]["payload"]), 5, "the new payload")
    assert time.monotonic() - changed_at < 2.5  # a tick a second, seen within a second
    # The leader stops: the other takes over and keeps ticking, no tick twice.
    servers[0].stop()
    count = len(ticked())
    wait_until(lambda: len(ticked()) >= count + 3, 20, "ticks from the other process")
    paused = httpx.post(f"{urls[1]}/schedules/every-second/pause")
    assert paused.status_code == 200
    assert paused.json()["next_runs"] == []
    ticks = [r["run_at"] for r in ticked()]
    assert max(Counter(ticks).values()) == 1, "a tick was enqueued twice"
    # Every tick is on the schedule's phase: a whole number of seconds after the first.
    for tick in ticks:
        assert (tick - first_tick) % timedelta(seconds=1) == timedelta(0), tick


def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(
    base: str, pg_dsn: str, schema: str
) -> None:
    good = {"name": "nightly", "type": "report", "cron": "0 3 * * *"}
    for body, field in [
        ({**good, "colour": "red"}, "colour"),
        ({**good, "cron": "0 3 * *"}, "cron"),
        ({**good, "cron": None, "every": "0s"}, "every"),
        ({**good, "cron": None, "every": "500ms"}, "every"),
        ({**good, "timezone": "Mars/Olympus"}, "timezone"),
        ({**good, "missed": "never"}, "missed"),
        ({**good, "every": "30s"}, "cron"),  # both
        ({"name": "nightly", "type": "report"}, "cron"),  # neither
        ({**good, "name": "no spaces"}, "name"),
        ({**good, "payload": [1, 2]}, "payload"),
        ({**good, "priority": 2**40}, "priority"),
    ]:
        refused = httpx.post(f"{base}/schedules", json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["detail"][0]["field"] == field, refused.text
    nan = httpx.post(
        f"{base}/schedules",
        content=b'{"name": "n", "type": "report", "every": "1m", "payload": {"x": NaN}}',
        headers={"Content-Type": "application/json"},
    )
    assert nan.status_code == 422
    assert nan.json()["detail"][0]["field"].startswith("payload")
    assert rows(pg_dsn, f'SELECT name FROM "{schema}".schedules') == []

    assert httpx.post(f"{base}/schedules", json=good).status_code == 201
    taken = httpx.post(f"{base}/schedules", json={**good, "cron": "0 4 * * *"})
    assert taken.status_code == 409
    assert "exists" in taken.json()["detail"]
    for patch, field in [
        ({"every": "0s"}, "every"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"enabled": None}, "enabled"),
        ({"name": "other"}, "name"),
        ({}, "body"),
    ]:
        refused = httpx.patch(f"{base}/schedules/nightly", json=patch)
        assert refused.status_code == 422, (patch, refused.text)
        assert refused.json()["detail"][0]["field"] == field, refused.text
    shown = httpx.get(f"{base}/schedules/nightly").json()
    assert (shown["cron"], shown["every"], shown["enabled"]) == ("0 3 * * *", None, True)
    assert httpx.get(f"{base}/schedules/missing").status_code == 404
    assert httpx.delete(f"{base}/schedules/missing").status_code == 404


def test_a_schedules_jobs_are_checked_as_post_jobs_checks_a_job(
    spawn: Spawn, env: dict[str, str], pg_dsn: str, schema: str, tmp_path: Path
) -> None:
    """Against `jobqueue serve`, which checks job types: a schedule of a type that
    nothing runs (no task, no live worker announcing it, no declaration) is refused as
    `POST /jobs` refuses such a job, naming `type`, and nothing is stored; else a typo
    would enqueue, at every tick, a job that waits for good. A declared type's schema
    holds the schedule's payload, on create and on PATCH."""
    base = f"http://127.0.0.1:{env['PORT']}"
    spawn(["serve"], env, name="serve").wait_http(base)
    refused = httpx.post(
        f"{base}/schedules", json={"name": "nightly", "type": "reprot", "cron": "0 3 * * *"}
    )
    assert refused.status_code == 422, refused.text
    [problem] = refused.json()["detail"]
    assert (problem["field"], problem["type"]) == ("type", "unknown_type")
    assert "jobqueue types add" in problem["msg"]
    stored = f"SELECT name FROM \"{schema}\".schedules WHERE source = 'api'"
    assert rows(pg_dsn, stored) == []

    made = httpx.post(  # noop: one of serve's demo tasks
        f"{base}/schedules", json={"name": "nightly", "type": "noop", "cron": "0 3 * * *"}
    )
    assert made.status_code == 201, made.text
    moved = httpx.patch(f"{base}/schedules/nightly", json={"type": "reprot"})
    assert moved.status_code == 422, moved.text
    assert moved.json()["detail"][0]["field"] == "type"
    assert httpx.get(f"{base}/schedules/nightly").json()["type"] == "noop"

    schema_file = tmp_path / "resize.json"
    schema_file.write_text(json.dumps({
        "type": "object", "required": ["width"],
        "properties": {"width": {"type": "integer", "minimum": 1}},
    }))  # fmt: skip
    declared = jobqueue(env, "types", "add", "resize", "--payload-schema", str(schema_file))
    assert declared.returncode == 0, declared.stderr
    thumbs = {"name": "thumbs", "type": "resize", "every": "1m", "payload": {"width": 0}}

    def refused_for_width() -> bool:  # once the server has read the declaration (1 s)
        answer = httpx.post(f"{base}/schedules", json=thumbs)
        return answer.status_code == 422 and answer.json()["detail"][0]["field"] == (
            "payload.width"
        )

    wait_until(refused_for_width, 5, "the declared schema held against the payload")
    assert rows(pg_dsn, stored) == [("nightly",)]
    made = httpx.post(f"{base}/schedules", json={**thumbs, "payload": {"width": 200}})
    assert made.status_code == 201, made.text
    off = httpx.patch(f"{base}/schedules/thumbs", json={"payload": {}})
    assert off.status_code == 422, off.text
    assert off.json()["detail"][0]["type"] == "payload_schema"
    assert httpx.get(f"{base}/schedules/thumbs").json()["payload"] == {"width": 200}


def test_a_schedule_is_shown_changed_triggered_and_deleted_with_an_audit_row_each(
    base: str, pg_dsn: str, schema: str
) -> None:
    made = httpx.post(
        f"{base}/schedules",
        json={"name": "report-berlin", "type": "report", "cron": "0 3 * * *",
              "timezone": "Europe/Berlin", "payload": {"format": "pdf"}, "missed": "once"},
    ).json()  # fmt: skip
    # 03:00 in Berlin is 02:00 UTC in winter: five nights in a row.
    runs = [datetime.fromisoformat(r) for r in made["next_runs"]]
    assert len(runs) == 5
    assert all(r.hour == 2 and r.minute == 0 for r in runs)
    assert [b - a for a, b in itertools.pairwise(runs)] == [timedelta(days=1)] * 4
    assert (made["source"], made["missed"], made["last_job"]) == ("api", "once", None)

    every = httpx.patch(f"{base}/schedules/report-berlin", json={"every": "5m"}).json()
    assert (every["cron"], every["every"]) == (None, "5m")
    triggered = httpx.post(f"{base}/schedules/report-berlin/trigger")
    assert triggered.status_code == 201
    job = triggered.json()
    assert (job["type"], job["payload"], job["status"]) == ("report", {"format": "pdf"}, "pending")
    shown = httpx.get(f"{base}/schedules/report-berlin").json()
    assert shown["last_job"] == {"id": job["id"], "status": "pending"}
    assert shown["next_run_at"] == every["next_run_at"]  # a trigger keeps the next tick
    listed = httpx.get(f"{base}/schedules").json()
    assert [s["name"] for s in listed["schedules"]] == ["report-berlin"]
    assert httpx.delete(f"{base}/schedules/report-berlin").status_code == 204
    assert httpx.get(f"{base}/schedules/report-berlin").status_code == 404
    assert rows(pg_dsn, f'SELECT id FROM "{schema}".jobs') != []  # its job stays

    audit = rows(pg_dsn, f'SELECT action, target, result FROM "{schema}".audit_log ORDER BY id')
    assert [(r["action"], r["target"], r["result"]) for r in audit] == [
        ("schedule.create", "report-berlin", "ok"),
        ("schedule.update", "report-berlin", "ok"),
        ("schedule.trigger", "report-berlin", "ok"),
        ("schedule.delete", "report-berlin", "ok"),
    ]


def test_a_schedule_declared_in_code_is_shown_and_can_only_be_paused_resumed_or_triggered(
    spawn: Spawn, env: dict[str, str], pg_dsn: str, schema: str
) -> None:
    server = spawn(["serve"], {**env, "JOBQUEUE_CRON": "noop=0 6 * * *@Europe/Paris"})
    url = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(url)
    # The leader writes the code's schedules when it takes the lead.
    wait_until(lambda: httpx.get(f"{url}/schedules/noop").status_code == 200, 10, "written")
    shown = httpx.get(f"{url}/schedules/noop").json()
    assert (shown["source"], shown["cron"], shown["timezone"]) == (
        "code",
        "0 6 * * *",
        "Europe/Paris",
    )
    for refused in (
        httpx.patch(f"{url}/schedules/noop", json={"cron": "0 7 * * *"}),
        httpx.delete(f"{url}/schedules/noop"),
    ):
        assert refused.status_code == 409, refused.text
        assert "declared in code" in refused.json()["detail"]
    assert httpx.post(f"{url}/schedules/noop/pause").json()["enabled"] is False
    assert httpx.patch(f"{url}/schedules/noop", json={"enabled": True}).json()["enabled"]
    job = httpx.post(f"{url}/schedules/noop/trigger").json()
    assert set(job["payload"]) == {"tick"}
    audit = rows(pg_dsn, f'SELECT action, result FROM "{schema}".audit_log ORDER BY id')
    assert [(r["action"], r["result"]) for r in audit] == [
        ("schedule.update", "conflict:code"),
        ("schedule.delete", "conflict:code"),
        ("schedule.pause", "ok"),
        ("schedule.resume", "ok"),
        ("schedule.trigger", "ok"),
    ]


def test_changing_schedules_takes_its_scope_and_a_restricted_token_its_reach(
    spawn: Spawn, env: dict[str, str]
) -> None:
    tokens = {}
    for name, args in {
        "reader": ["--scope", "jobs:read"],
        "mail-only": ["--scope", "schedules:control", "--scope", "jobs:read", "--queue", "mail"],
        "ops": ["--scope", "schedules:control", "--scope", "jobs:read"],
    }.items():
        made = jobqueue(env, "tokens", "create", "--name", name, *args, "--json")
        assert made.returncode == 0, made.stderr
        tokens[name] = json.loads(made.stdout)["secret"]
    server = spawn(["api"], env, name="api")
    url = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(url)

    def as_(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[who]}"}

    body = {"name": "digest", "type": "mail_digest", "every": "1h", "queue": "mail"}
    assert httpx.post(f"{url}/schedules", json=body, headers=as_("reader")).status_code == 403
    assert httpx.post(f"{url}/schedules", json=body, headers=as_("mail-only")).status_code == 201
    other = {"name": "billing", "type": "invoice", "every": "1h", "queue": "billing"}
    refused = httpx.post(f"{url}/schedules", json=other, headers=as_("mail-only"))
    assert refused.status_code == 403
    assert "billing" in refused.json()["detail"]
    assert httpx.post(f"{url}/schedules", json=other, headers=as_("ops")).status_code == 201
    # Out of its reach, a schedule does not exist for the restricted token.
    listed = httpx.get(f"{url}/schedules", headers=as_("mail-only")).json()["schedules"]
    assert [s["name"] for s in listed] == ["digest"]
    assert httpx.get(f"{url}/schedules/billing", headers=as_("mail-only")).status_code == 404
    moved = httpx.patch(
        f"{url}/schedules/digest", json={"queue": "billing"}, headers=as_("mail-only")
    )
    assert moved.status_code == 403
    assert httpx.get(f"{url}/schedules/billing", headers=as_("reader")).status_code == 200
