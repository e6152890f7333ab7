"""Limits over real HTTP (PATCH /queues/{name}, GET /queues) against a real `jobqueue
api`, and a running worker that follows a limit set while it works."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta

import asyncpg
import httpx
import pytest

from tests.acceptance.test_limits import (
    fill,
    most_overlapping,
    spans,
    start_workers,
    wait_spans,
)
from tests.acceptance.test_metrics import Scrape, wait_until
from tests.conftest import Spawn, free_port


async def audit_rows(dsn: str, schema: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(
            f'SELECT action, target, filter FROM "{schema}".audit_log ORDER BY id'
        )
    finally:
        await conn.close()


def test_limits_are_set_and_shown_over_http_on_a_queue_with_no_jobs(
    base: str, pg_dsn: str, schema: str
) -> None:
    answer = httpx.patch(f"{base}/queues/mail", json={"global_limit": 5, "rate_limit": "100/m"})
    assert answer.status_code == 200, answer.text
    limits = answer.json()["limits"]
    assert (limits["global_limit"], limits["rate_limit"], limits["key_limit"]) == (5, "100/m", None)
    assert (limits["global_in_use"], limits["global_waiting"], limits["rate_in_use"]) == (0, 0, 0)

    # A limit left out is kept; null removes one.
    answer = httpx.patch(f"{base}/queues/mail", json={"key_limit": 2, "rate_limit": None})
    limits = answer.json()["limits"]
    assert (limits["global_limit"], limits["key_limit"], limits["rate_limit"]) == (5, 2, None)
    shown = {q["name"]: q for q in httpx.get(f"{base}/queues").json()["queues"]}
    assert shown["mail"]["limits"] == limits

    # Refusals name the field and store nothing.
    for body, field in [
        ({"rate_limit": "100/d"}, "rate_limit"),
        ({"global_limit": 0}, "global_limit"),
        ({"burst": 3}, "burst"),
        ({}, "body"),
    ]:
        refused = httpx.patch(f"{base}/queues/mail", json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["detail"][0]["field"] == field, refused.text
    shown = {q["name"]: q for q in httpx.get(f"{base}/queues").json()["queues"]}
    assert shown["mail"]["limits"] == limits

    rows = asyncio.run(audit_rows(pg_dsn, schema))
    assert [(r["action"], r["target"]) for r in rows] == [("queue.limits", "mail")] * 2
    assert '"rate_limit": "100/m"' in rows[0]["filter"]


async def changed_at(dsn: str, schema: str, queue: str) -> datetime:
    conn = await asyncpg.connect(dsn)
    try:
        at: datetime = await conn.fetchval(
            f'SELECT updated_at FROM "{schema}".queues WHERE name = $1', queue
        )
        return at
    finally:
        await conn.close()


@pytest.mark.slow
def test_a_limit_set_while_workers_run_holds_from_the_next_poll(
    base: str, pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    workers = start_workers(spawn, env, count=2)
    asyncio.run(fill(pg_dsn, schema, "limited", [{"ms": 50} for _ in range(200)]))
    while len(asyncio.run(spans(pg_dsn, schema))) < 20:  # running unlimited: 20 at once
        time.sleep(0.05)
    answer = httpx.patch(f"{base}/queues/limited", json={"global_limit": 2})
    assert answer.status_code == 200, answer.text
    assert answer.json()["limits"]["global_limit"] == 2
    rows = wait_spans(pg_dsn, schema, 200)
    for w in workers:
        assert w.stop() == 0, w.output
    change = asyncio.run(changed_at(pg_dsn, schema, "limited"))
    assert most_overlapping([r for r in rows if r["started"] < change]) > 2  # unlimited before
    # Workers read the limits once per poll interval (0.2 s here): the jobs they
    # started by then end, and from then on no more than 2 run at once.
    poll = change + timedelta(seconds=0.2)
    settled = max(r["ended"] for r in rows if r["started"] <= poll)
    at_once = [
        sum(1 for o in rows if o["started"] <= r["started"] < o["ended"])
        for r in rows
        if r["started"] > settled
    ]
    assert at_once
    assert max(at_once) == 2, max(at_once)


def test_metrics_carry_each_limit_its_use_and_the_jobs_it_holds_back(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    port = free_port()
    env.update(JOBQUEUE_APP="limits_app:jq", JOBQUEUE_LIMITS="limited:global_limit=2")
    worker = spawn(["worker", "--metrics-port", str(port)], env, name="worker")
    worker.wait_for_output("worker started")
    asyncio.run(fill(pg_dsn, schema, "limited", [{"ms": 30_000} for _ in range(12)]))
    url = f"http://127.0.0.1:{port}/metrics"

    def shown() -> tuple[bool, str]:
        scrape = Scrape(url)
        values = tuple(
            scrape.total(name, queue="limited", limit="global")
            for name in (
                "jobqueue_queue_limit",
                "jobqueue_queue_limit_in_use",
                "jobqueue_queue_limit_waiting",
            )
        )
        return values == (2, 2, 10), str(values)

    wait_until(shown)
    worker.popen.kill()
    worker.popen.wait()
