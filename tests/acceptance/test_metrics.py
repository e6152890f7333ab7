"""Prometheus metrics scraped from real processes: `serve`, `api`, and
`worker --processes 2 --metrics-port`, while jobs complete, retry, fail and are discarded.
The counters are the database's outcome counts, exactly; the queue gauges, summed over
every scraped process, are the database's counts; a child killed with -9 and restarted
takes no counter down and doubles none."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable

import asyncpg
import httpx
from prometheus_client.parser import text_string_to_metric_families

from jobqueue.db.migrate import code_version
from jobqueue.release import version
from tests.conftest import ROOT, Process, Spawn, free_port, free_ports

# One job of each kind runs: completed; retried then completed; retried then failed;
# discarded.
BATCH = [("ok", 30), ("flaky", 8), ("doomed", 4), ("hopeless", 3)]
QUEUE_STATES = ("pending", "running", "completed", "failed", "cancelled", "waiting")
FINAL = ("completed", "failed", "cancelled")

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Scrape:
    """One scrape of /metrics, parsed by prometheus_client's parser."""

    def __init__(self, url: str) -> None:
        answer = httpx.get(url, timeout=10)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain")
        self.text = answer.text
        self.samples: Samples = {}
        self.types: dict[str, str] = {}
        self.families: dict[str, str] = {}
        for family in text_string_to_metric_families(self.text):
            self.families[family.name] = family.type
            for s in family.samples:
                self.types[s.name] = family.type
                self.samples[s.name, tuple(sorted(s.labels.items()))] = s.value

    def total(self, name: str, **labels: str) -> float:
        return sum(
            value
            for (sample, have), value in self.samples.items()
            if sample == name and set(labels.items()) <= set(have)
        )

    def names(self) -> set[str]:
        """The series names this scrape declares, a labelled one without samples yet
        (jobqueue_jobs_released_total before any shutdown) included."""
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}
        declared = {f + x for f, kind in self.families.items() for x in suffixes.get(kind, [""])}
        return declared | {name for name, _ in self.samples}

    def counters(self) -> Samples:
        """Every sample that may only grow: counters, and histogram buckets, counts, sums."""
        return {
            k: v for k, v in self.samples.items() if self.types[k[0]] in ("counter", "histogram")
        }


def total(scrapes: Iterable[Scrape], name: str, **labels: str) -> float:
    return sum(s.total(name, **labels) for s in scrapes)


def promtool_check_metrics(text: str) -> None:
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


async def query(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


def outcomes(dsn: str, schema: str) -> Counter[tuple[str, str]]:
    """(type, outcome) -> attempts, from the jobs and their attempt history."""
    jobs = asyncio.run(
        query(
            dsn,
            f"""SELECT type, status, COALESCE(last_error LIKE 'discarded:%', false) AS discarded,
                       count(*) AS n
                FROM "{schema}".jobs GROUP BY 1, 2, 3""",
        )
    )
    attempts = asyncio.run(
        query(
            dsn,
            f"""SELECT j.type, count(*) AS n FROM "{schema}".job_attempts AS a
                JOIN "{schema}".jobs AS j ON j.id = a.job_id GROUP BY 1""",
        )
    )
    found: Counter[tuple[str, str]] = Counter()
    for r in jobs:
        if r["status"] == "failed":
            found[r["type"], "discarded" if r["discarded"] else "failed"] += r["n"]
        elif r["status"] in ("completed", "cancelled"):
            found[r["type"], r["status"]] += r["n"]
    for r in attempts:  # every failed attempt is kept; those that did not end the job retried
        found[r["type"], "retried"] += r["n"]
    for (kind, outcome), n in list(found.items()):
        if outcome in ("failed", "discarded"):
            found[kind, "retried"] -= n
    return +found


def state_counts(dsn: str, schema: str) -> dict[tuple[str, str], int]:
    rows = asyncio.run(
        query(dsn, f'SELECT queue, status, count(*) AS n FROM "{schema}".jobs GROUP BY 1, 2')
    )
    counts = {(r["queue"], r["status"]): r["n"] for r in rows}
    queues = {q for q, _ in counts}
    return {(q, s): counts.get((q, s), 0) for q in queues for s in QUEUE_STATES}


def wait_all_final(dsn: str, schema: str, jobs: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    sql = f'SELECT count(*) AS n FROM "{schema}".jobs WHERE status = ANY($1::text[])'
    while (done := asyncio.run(query(dsn, sql, list(FINAL)))[0]["n"]) < jobs:
        assert time.monotonic() < deadline, f"{done} of {jobs} jobs ended"
        time.sleep(0.1)


def wait_until(
    check: Callable[[], tuple[bool, str]], timeout: float = 30, what: str = "the scrape"
) -> None:
    """Poll ``check`` (scrapes are up to a second behind, the queue gauges a leader
    interval) until it holds."""
    deadline = time.monotonic() + timeout
    while True:
        ok, detail = check()
        if ok:
            return
        assert time.monotonic() < deadline, f"{what} never matched: {detail}"
        time.sleep(0.1)


def finished(scrapes: Iterable[Scrape]) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for s in scrapes:
        for (name, labels), value in s.samples.items():
            if name == "jobqueue_jobs_finished_total" and value:
                have = dict(labels)
                counts[have["type"], have["outcome"]] += int(value)
    return counts


def queue_gauges(scrapes: Iterable[Scrape]) -> dict[tuple[str, str], int]:
    gauges: Counter[tuple[str, str]] = Counter()
    for s in scrapes:
        for (name, labels), value in s.samples.items():
            if name == "jobqueue_jobs":
                have = dict(labels)
                gauges[have["queue"], have["state"]] += int(value)
    return dict(gauges)


def post_batch(base: str, jobs: list[dict[str, object]]) -> None:
    answer = httpx.post(f"{base}/jobs/batch", json={"jobs": jobs}, timeout=30)
    assert answer.status_code == 201, answer.text


def batch() -> list[dict[str, object]]:
    return [{"type": kind, "payload": {}} for kind, n in BATCH for _ in range(n)]


def dashboard_metrics() -> set[str]:
    dashboard = json.loads((ROOT / "examples" / "grafana" / "jobqueue.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert exprs, "the dashboard queries nothing"
    return {name for expr in exprs for name in re.findall(r"\bjobqueue_[a-z_]+", expr)}


def alert_metrics() -> set[str]:
    text = (ROOT / "examples" / "prometheus" / "alerts.yml").read_text()
    return set(re.findall(r"\bjobqueue_[a-z_]+", text))


def test_serve_counts_every_outcome_as_the_database_has_it(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(
        JOBQUEUE_APP="metrics_app:jq", RETRY_DELAY_SECONDS="0", JOBQUEUE_RESCUE_INTERVAL="0.5"
    )
    server = spawn(["serve"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    post_batch(base, batch())
    singles = 5
    for _ in range(singles):
        assert httpx.post(f"{base}/jobs", json={"type": "ok", "payload": {}}).status_code == 201
    jobs = sum(n for _, n in BATCH) + singles
    wait_all_final(pg_dsn, schema, jobs)

    expected = outcomes(pg_dsn, schema)
    assert expected["flaky", "retried"]
    assert expected["doomed", "failed"]
    assert expected["hopeless", "discarded"]

    def counted() -> tuple[bool, str]:
        got = finished([Scrape(f"{base}/metrics")])
        return got == expected, f"scraped {dict(got)}, database {dict(expected)}"

    wait_until(counted)
    scrape = Scrape(f"{base}/metrics")
    stored = Counter(dict(BATCH)) + Counter({"ok": singles})
    for kind, n in stored.items():
        assert scrape.total("jobqueue_jobs_enqueued_total", type=kind) == n
    attempts: Counter[str] = Counter()
    for (kind, _), n in expected.items():
        attempts[kind] += n
    for kind, n in attempts.items():
        assert scrape.total("jobqueue_job_duration_seconds_count", type=kind) == n
        assert scrape.total("jobqueue_job_wait_seconds_count", type=kind) == n
    assert scrape.total("jobqueue_claim_seconds_count") > 0
    assert scrape.total("jobqueue_http_requests_total", route="/jobs", status="201") == singles
    assert scrape.total("jobqueue_http_requests_total", route="/jobs/batch", status="201") == 1
    assert scrape.total("jobqueue_worker_slots", state="free") == 5
    assert scrape.total("jobqueue_listener_up") == 1
    assert scrape.total("jobqueue_pool_max_connections") > 0
    assert not any("job_id" in dict(labels) for _, labels in scrape.samples)

    def gauges_match() -> tuple[bool, str]:
        got, want = queue_gauges([Scrape(f"{base}/metrics")]), state_counts(pg_dsn, schema)
        return got == want, f"scraped {got}, database {want}"

    wait_until(gauges_match)
    promtool_check_metrics(scrape.text)
    names = scrape.names()
    assert dashboard_metrics() <= names, dashboard_metrics() - names
    assert alert_metrics() <= names, alert_metrics() - names
    assert server.stop() == 0


def test_a_worker_port_serves_the_sum_of_its_processes_through_a_kill(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    env.update(
        JOBQUEUE_APP="metrics_app:jq",
        RETRY_DELAY_SECONDS="0",
        JOBQUEUE_RESCUE_INTERVAL="0.5",
        JOBQUEUE_LEASE_SECONDS="2",
        JOBQUEUE_SHUTDOWN_TIMEOUT="1",
        # The workers take the mystery jobs too, and fail them for want of a handler:
        # their attempts are counted as "other".
        JOBQUEUE_CLAIM_ANY_TYPE="true",
    )
    api = spawn(["api"], env, "api")
    base = f"http://127.0.0.1:{env['PORT']}"
    metrics_port, serve_port = free_ports(2, besides=int(env["PORT"]))
    supervisor = spawn(
        ["worker", "--processes", "2", "--metrics-port", str(metrics_port)], env, "workers"
    )
    # A `serve` too: three processes that run workers, and compete for the lead.
    serve_base = f"http://127.0.0.1:{serve_port}"
    server = spawn(["serve"], {**env, "PORT": serve_base.rpartition(":")[2]}, "serve")
    api.wait_http(base)
    server.wait_http(serve_base)
    supervisor.wait_for_output("Started 2 worker processes")
    wait_started(supervisor, 2)
    workers_url = f"http://127.0.0.1:{metrics_port}/metrics"

    def scrapes() -> list[Scrape]:
        return [Scrape(f"{base}/metrics"), Scrape(f"{serve_base}/metrics"), Scrape(workers_url)]

    # `api` stores jobs of types without a handler: counted as "other", never by name.
    unknown = [{"type": f"mystery_{i}", "payload": {}, "max_attempts": 1} for i in range(3)]
    post_batch(base, batch() + unknown)
    jobs = sum(n for _, n in BATCH) + len(unknown)
    wait_all_final(pg_dsn, schema, jobs)
    expected = outcomes(pg_dsn, schema)
    expected_labels: Counter[tuple[str, str]] = Counter()
    for (kind, outcome), n in expected.items():
        expected_labels["other" if kind.startswith("mystery_") else kind, outcome] += n

    def counted() -> tuple[bool, str]:
        got = finished(scrapes())
        return got == expected_labels, f"scraped {dict(got)}, database {dict(expected_labels)}"

    wait_until(counted)
    first = scrapes()
    assert total(first, "jobqueue_jobs_enqueued_total", type="other") == len(unknown)
    # Each port reports its release once, the two worker processes' included.
    release = {"version": version(), "schema": str(code_version())}
    assert [s.total("jobqueue_build_info", **release) for s in first] == [1, 1, 1]
    assert not any(name.startswith("mystery") for s in first for _, labels in s.samples
                   for _, name in labels)  # fmt: skip
    # The API alone exports neither the queue gauges nor those of workers it does not run.
    api_names = {name for name, _ in first[0].samples}
    assert not api_names & {"jobqueue_jobs", "jobqueue_listener_up", "jobqueue_worker_slots"}
    promtool_check_metrics(first[2].text)

    def gauges_match() -> tuple[bool, str]:
        got, want = queue_gauges(scrapes()), state_counts(pg_dsn, schema)
        return got == want, f"scraped {got}, database {want}"

    wait_until(gauges_match)

    # Kill -9 a worker process while it runs jobs.
    victim = worker_pids(supervisor)[0]
    # More than the other processes' 10 slots: the victim runs some of them.
    post_batch(base, [{"type": "slow", "payload": {"seconds": 20}} for _ in range(16)])
    running_sql = f"""SELECT count(*) AS n FROM "{schema}".jobs
                      WHERE status = 'running' AND worker_id LIKE $1"""
    deadline = time.monotonic() + 30
    while not (held := asyncio.run(query(pg_dsn, running_sql, f"%:{victim}:%"))[0]["n"]):
        assert time.monotonic() < deadline, "the victim never ran a slow job"
        time.sleep(0.1)
    before = Scrape(workers_url).counters()
    os.kill(victim, signal.SIGKILL)
    supervisor.wait_for_output(f"Worker process {victim} exited with code -9")
    wait_started(supervisor, 3)

    seen: list[Scrape] = []

    def rescued() -> tuple[bool, str]:
        every = scrapes()
        seen.append(every[2])
        # Counted by the leader that rescued them: `serve` or a worker process.
        n = total(every, "jobqueue_jobs_finished_total", outcome="rescued")
        return n >= held, f"{n} rescued counted, {held} held by the killed process"

    wait_until(rescued)
    for scrape in seen:
        after = scrape.counters()
        went_down = {k: (v, after.get(k, 0.0)) for k, v in before.items() if after.get(k, 0.0) < v}
        assert not went_down, went_down
    # Nothing counted twice: the jobs that ended before the kill are counted as before.
    after_kill = finished(scrapes())
    assert after_kill["slow", "rescued"] >= held
    del after_kill["slow", "rescued"]
    assert after_kill == expected_labels

    def slots_match() -> tuple[bool, str]:
        s = Scrape(workers_url)
        slots = s.total("jobqueue_worker_slots")
        return slots == 2 * 5, f"{slots} slots: the dead process's gauges should be gone"

    wait_until(slots_match)
    supervisor.popen.send_signal(signal.SIGTERM)
    assert supervisor.popen.wait(30) == 0, supervisor.output
    assert server.stop() == 0
    assert api.stop() == 0


def wait_started(supervisor: Process, count: int) -> None:
    deadline = time.monotonic() + 30
    while supervisor.output.count("worker started") < count:
        assert time.monotonic() < deadline, supervisor.output
        time.sleep(0.05)


def worker_pids(supervisor: Process) -> list[int]:
    found = re.findall(r"pids=([\d,]+)", supervisor.output)
    assert found, supervisor.output
    return [int(p) for p in found[-1].split(",")]


def test_one_worker_process_serves_its_own_port(env: dict[str, str], spawn: Spawn) -> None:
    port = free_port()
    worker = spawn(["worker", "--metrics-port", str(port)], env)
    worker.wait_for_output("worker started")
    url = f"http://127.0.0.1:{port}/metrics"

    def serving() -> tuple[bool, str]:
        try:
            slots = Scrape(url).total("jobqueue_worker_slots", state="free")
        except httpx.TransportError as exc:
            return False, str(exc)
        return slots == 5, f"{slots} free slots"

    wait_until(serving)
    promtool_check_metrics(Scrape(url).text)
    assert worker.stop() == 0


def test_metrics_off_is_a_404_and_a_bad_or_taken_port_one_line(
    env: dict[str, str], spawn: Spawn
) -> None:
    off = spawn(["api", "--metrics", "off"], env, "off")
    base = f"http://127.0.0.1:{env['PORT']}"
    off.wait_http(base)
    answer = httpx.get(f"{base}/metrics")
    assert answer.status_code == 404
    assert "JOBQUEUE_METRICS=off" in answer.json()["detail"]
    assert off.stop() == 0

    bad = spawn(["worker", "--metrics-port", "99999"], env, "bad")
    assert bad.popen.wait(30) == 2
    lines = [line for line in bad.output.splitlines() if line.strip()]
    assert lines == [
        "jobqueue: error: JOBQUEUE_METRICS_PORT must be a port number from 0 to 65535, got '99999'"
    ]

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = spawn(["worker", "--metrics-port", str(port)], env, "busy")
        assert busy.popen.wait(30) == 2
    lines = [line for line in busy.output.splitlines() if line.strip()]
    assert lines == [
        f"jobqueue: error: JOBQUEUE_METRICS_PORT: cannot listen on 127.0.0.1:{port}: "
        "Address already in use"
    ]


def test_a_job_whose_unique_key_was_taken_is_not_counted_as_enqueued(
    pg_dsn: str, schema: str, env: dict[str, str], spawn: Spawn
) -> None:
    api = spawn(["api"], env, "api")
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    daily = {"type": "report", "payload": {}, "unique_key": "daily"}
    assert httpx.post(f"{base}/jobs", json=daily).status_code == 201
    assert httpx.post(f"{base}/jobs", json=daily).status_code == 200  # the holder answers
    weekly = {"type": "report", "payload": {}, "unique_key": "weekly"}
    plain = {"type": "report", "payload": {}}
    # The first key is taken; the second is taken by the job before it in the batch.
    answer = httpx.post(f"{base}/jobs/batch", json={"jobs": [daily, weekly, weekly, plain]})
    assert answer.status_code == 201, answer.text
    ids = answer.json()["ids"]
    assert ids[0] != ids[1] == ids[2] != ids[3]

    [stored] = asyncio.run(query(pg_dsn, f'SELECT count(*) FROM "{schema}".jobs'))
    assert stored[0] == 3
    scrape = Scrape(f"{base}/metrics")
    assert scrape.total("jobqueue_jobs_enqueued_total") == 3
