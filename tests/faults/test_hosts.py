"""Across hosts: two worker hosts and an API host, each a network namespace with an
address of its own, reach the database host over veth links with real TCP. Jobs drain
exactly once across both; one host is cut off mid-job (the kernel drops every packet
on its link), its jobs are rescued by the other, its late outcomes are refused by the
fence when the link returns, and it takes new jobs again by itself."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from tests.apps.ledger_app import LEDGER_TABLE
from tests.conftest import Process, Spawn, jobqueue
from tests.faults.hosts import Host, Network, NetworkUnavailable

pytestmark = pytest.mark.hosts

LEASE = 2.0
INTERVAL = 0.5
SLOTS = 8
JOBS = 3000
SLOW_MS = 1500  # the jobs in flight when the link goes: done before it returns
# As in test_rescue: the lease, up to a leader's term (three intervals) for a new
# leader, since the host cut off leads, and one interval; plus slack for a busy machine.
RESCUE_BOUND = LEASE + 4 * INTERVAL + 3
# The cut-off host's connections fail within 2 x (statement timeout + 1 s) and a new
# one is made within the connect timeout (5 s); plus its claim backoff and slack.
REJOIN_BOUND = 2 * (2 + 1) + 5 + 5


@pytest.fixture
def network() -> Iterator[Network]:
    try:
        with Network.make() as net:
            yield net
    except NetworkUnavailable as exc:
        pytest.skip(f"network namespaces cannot be made here (needs root and ip): {exc}")


class Direct:
    """The test's database, seen from the database host: never cut off."""

    def __init__(self, dsn: str, schema: str) -> None:
        self._dsn = dsn
        self._schema = schema

    def fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        async def go() -> list[asyncpg.Record]:
            conn = await asyncpg.connect(self._dsn)
            try:
                return await conn.fetch(query.replace("{s}", f'"{self._schema}"'), *args)
            finally:
                await conn.close()

        return asyncio.run(go())

    def value(self, query: str, *args: object) -> object:
        return self.fetch(query, *args)[0][0]

    def wait(self, query: str, *args: object, timeout: float, what: str) -> float:
        """Poll until ``query`` is true; return when, by time.monotonic()."""
        deadline = time.monotonic() + timeout
        while not self.value(query, *args):
            assert time.monotonic() < deadline, what
            time.sleep(0.05)
        return time.monotonic()

    def ran_by(self, jobs: list[int], pid: int) -> list[int]:
        """Those of ``jobs`` that process ``pid`` ran, by the ledger."""
        query = "SELECT job_id FROM {s}.ledger WHERE job_id = ANY($1) AND pid = $2"
        return [r["job_id"] for r in self.fetch(query, jobs, pid)]


def test_jobs_drain_once_across_hosts_and_survive_a_partition(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn, network: Network
) -> None:
    """3,000 jobs run once each, on both worker hosts; then the leading one is cut off
    mid-job: the other rescues its jobs within the lease and a few intervals, and when
    the link returns the fence refuses its late outcomes and it runs new jobs again."""
    target = urlsplit(pg_dsn)
    assert target.hostname, "the test database must be reached over TCP"
    database = (target.hostname, target.port or 5432)
    env.update(
        JOBQUEUE_APP="ledger_app:jq",
        JOBQUEUE_LOG_FORMAT="json",
        WORKER_COUNT=str(SLOTS),
        JOBQUEUE_LEASE_SECONDS=str(LEASE),
        JOBQUEUE_RESCUE_INTERVAL=str(INTERVAL),
        RETRY_DELAY_SECONDS="0",
        # As in test_network: a query cut off fails within 2 x (2 + 1) s, not a minute.
        JOBQUEUE_STATEMENT_TIMEOUT="2",
    )
    db = Direct(pg_dsn, schema)
    db.fetch(f"CREATE TABLE {{s}}.ledger {LEDGER_TABLE}")
    created = jobqueue(
        env, "tokens", "create", "--name", "hosts", "--scope", "jobs:enqueue", "--json"
    )
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["secret"]

    api_host = network.host("api", database)
    api = spawn(
        ["api", "--host", api_host.address], on(api_host, env), name="api", prefix=api_host.exec
    )
    base = f"http://{api_host.address}:{env['PORT']}"
    api.wait_http(base)
    hosts = [network.host(f"w{i}", database) for i in (1, 2)]
    workers = [spawn(["worker"], on(host, env), name=host.name, prefix=host.exec) for host in hosts]
    for w in workers:
        w.wait_for_output("worker started")
    host_of = {w.popen.pid: host.name for w, host in zip(workers, hosts, strict=True)}
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def enqueue(jobs: list[dict[str, object]]) -> list[int]:
        r = client.post("/jobs/batch", json={"jobs": jobs})
        assert r.status_code == 201, r.text
        ids: list[int] = r.json()["ids"]
        return ids

    # 1. Both hosts drain 3,000 jobs, each job once.
    started = time.monotonic()
    drained = enqueue([{"type": "record"}] * JOBS)
    drain_took = (
        db.wait(
            "SELECT count(*) = $1 FROM {s}.jobs WHERE status = 'completed'",
            JOBS,
            timeout=60,
            what="the 3,000 jobs did not drain",
        )
        - started
    )
    rows = db.fetch("SELECT job_id, attempt, pid FROM {s}.ledger")
    assert sorted(r["job_id"] for r in rows) == sorted(drained)  # each job once
    assert {r["attempt"] for r in rows} == {1}
    shares = Counter(host_of[r["pid"]] for r in rows)
    assert min(shares[h.name] for h in hosts) > JOBS // 10, shares  # both took their share

    # 2. The leading host is cut off while it runs jobs.
    ids = [worker_id(w) for w in workers]
    leader = ids.index(str(db.value("SELECT leader_id FROM {s}.leader")))
    cut, other = hosts[leader], hosts[1 - leader]
    cut_worker = workers[leader]
    cut_id = ids[leader]
    # A slot each: the other host is free to run the rescued jobs at once.
    enqueue([{"type": "record_slow", "payload": {"ms": SLOW_MS}}] * (2 * SLOTS))
    db.wait(
        "SELECT count(*) >= $1 FROM {s}.jobs WHERE status = 'running' AND worker_id = $2",
        SLOTS // 2,
        cut_id,
        timeout=20,
        what="the host to cut off runs no job",
    )
    network.cut(cut)
    cut_at = time.monotonic()
    # What it holds, once a write that was already on the wire has landed.
    holding = "SELECT id FROM {s}.jobs WHERE status = 'running' AND worker_id = $1 ORDER BY id"
    held: list[int] = []
    deadline = cut_at + LEASE / 2
    while (now_held := [r["id"] for r in db.fetch(holding, cut_id)]) != held:
        assert time.monotonic() < deadline, "the cut-off host's jobs kept changing"
        held = now_held
        time.sleep(0.1)
    assert held
    rescued_at = db.wait(
        """SELECT count(DISTINCT job_id) = $2 FROM {s}.job_attempts
           WHERE job_id = ANY($1) AND attempt = 1 AND worker_id = $3
             AND error = 'worker lost (lease expired)'""",
        held,
        len(held),
        cut_id,
        timeout=30,
        what="the cut-off host's jobs were not rescued",
    )
    rescue_took = rescued_at - cut_at
    assert rescue_took < RESCUE_BOUND, rescue_took
    assert db.value("SELECT leader_id FROM {s}.leader") == ids[1 - leader]  # failed over
    done_at = db.wait(
        "SELECT bool_and(status = 'completed') FROM {s}.jobs WHERE id = ANY($1)",
        held,
        timeout=30,
        what="the rescued jobs did not complete",
    )
    completed_took = done_at - cut_at

    # 3. The link returns: the late outcomes are refused, the host takes jobs again.
    network.restore(cut)
    back_at = time.monotonic()
    ran_on_cut = db.ran_by(held, cut_worker.popen.pid)
    deadline = back_at + 30
    while missing := set(ran_on_cut) - refused(cut_worker):
        assert time.monotonic() < deadline, (missing, cut_worker.output[-3000:])
        time.sleep(0.1)
    refused_took = time.monotonic() - back_at
    assert "Stale completion of job" in cut_worker.output  # done while cut off, then refused
    rejoined: list[int] = []
    deadline = back_at + REJOIN_BOUND
    while not rejoined:
        assert time.monotonic() < deadline, cut_worker.output[-3000:]
        fresh = enqueue([{"type": "record"}] * SLOTS)
        time.sleep(0.2)
        rejoined = db.ran_by(fresh, cut_worker.popen.pid)
    rejoin_took = time.monotonic() - back_at
    db.wait(
        "SELECT bool_and(status = 'completed') FROM {s}.jobs",
        timeout=30,
        what="jobs left unfinished",
    )
    for proc in (*workers, api):
        assert proc.stop() == 0, proc.output[-3000:]
    client.close()

    # 4. The ledger: every job ran, each attempt once; the attempt that completed a job
    # is its last; the cut-off host's jobs ran again on the other host only.
    jobs = {r["id"]: r for r in db.fetch("SELECT id, status, attempts FROM {s}.jobs")}
    ledger = db.fetch("SELECT job_id, attempt, pid, count(*) AS n FROM {s}.ledger GROUP BY 1, 2, 3")
    assert [r for r in ledger if r["n"] > 1] == []
    assert len({(r["job_id"], r["attempt"]) for r in ledger}) == len(ledger)
    assert {r["job_id"] for r in ledger} == set(jobs)
    attempts = {(r["job_id"], r["attempt"]): r["pid"] for r in ledger}
    assert {r["status"] for r in jobs.values()} == {"completed"}
    assert [j for j, r in jobs.items() if (j, r["attempts"]) not in attempts] == []
    assert {jobs[j]["attempts"] for j in held} == {2}
    assert {host_of[attempts[(j, 2)]] for j in held} == {other.name}
    assert {r["attempts"] for j, r in jobs.items() if j not in held} == {1}
    # Completed exactly once each: every completion a worker made was written but the
    # cut-off host's late ones, which the fence refused.
    made = Counter(job for w in workers for job in events(w, "job.completed"))
    rejected = Counter(job for w in workers for job in stale(w, "completion"))
    assert made - rejected == Counter(set(jobs)), (made - rejected) ^ Counter(set(jobs))
    print(
        f"\nacross hosts: {JOBS} jobs drained in {drain_took:.2f}s, {dict(shares)}; "
        f"{cut.name} cut off with {len(held)} jobs held: rescued {rescue_took:.2f}s after "
        f"the cut, completed on {other.name} after {completed_took:.2f}s; link back: "
        f"{len(ran_on_cut)} late outcomes refused within {refused_took:.2f}s, new jobs "
        f"run again after {rejoin_took:.2f}s"
    )


def on(host: Host, env: dict[str, str]) -> dict[str, str]:
    """``env`` for a process of ``host``: the database through its link."""
    return {**env, "DATABASE_URL": host.dsn_of(env["DATABASE_URL"])}


def log_lines(proc: Process) -> Iterator[dict[str, Any]]:
    for line in proc.output.splitlines():
        with contextlib.suppress(ValueError):
            yield json.loads(line)


def events(proc: Process, event: str) -> list[int]:
    """The jobs of each ``event`` the process logged."""
    return [line["job_id"] for line in log_lines(proc) if line.get("event") == event]


STALE = re.compile(r"Stale (\S+) of job (\d+) attempt \d+ rejected")


def stale(proc: Process, what: str | None = None) -> list[int]:
    """The jobs whose outcome from this process (a ``what``: completion, failure...)
    the fence refused."""
    return [
        int(m[2])
        for line in log_lines(proc)
        if (m := STALE.match(line.get("event", ""))) and what in (None, m[1])
    ]


LEASE_LOST = re.compile(r"Lease of job (\d+) attempt \d+ not renewed")


def refused(proc: Process) -> set[int]:
    """The jobs whose attempt by this process the fence refused: its outcome, or its
    lease while the attempt still ran."""
    return set(stale(proc)) | {
        int(m[1]) for line in log_lines(proc) if (m := LEASE_LOST.match(line.get("event", "")))
    }


def worker_id(proc: Process) -> str:
    for line in log_lines(proc):
        if line.get("event") == "worker started":
            return str(line["worker_id"])
    raise AssertionError(proc.output[-3000:])
