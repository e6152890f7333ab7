"""Children in the fleet: 200 parents, each spawning 5 children and waiting for them,
across 4 worker processes. Parents and children meet on every process at once; each
parent completes exactly once, with its children's results, and no child is spawned
twice."""

from __future__ import annotations

import json
import time
from collections import Counter

from jobqueue.config import Settings
from tests.conftest import Spawn, fetch

PARENTS = 200


def test_200_parents_with_5_children_each_across_4_processes(
    settings: Settings, env: dict[str, str], spawn: Spawn
) -> None:
    schema = settings.schema
    fetch(settings.database_url, f'CREATE TABLE "{schema}".ledger '
          "(job_id bigint NOT NULL, what text NOT NULL, attempt int NOT NULL)")  # fmt: skip
    env.update(JOBQUEUE_APP="durable_app:jq", WORKER_COUNT="4")
    supervisor = spawn(["worker", "--processes", "4"], env, name="fleet")
    deadline = time.monotonic() + 30
    while supervisor.output.count("worker started") < 4:
        assert time.monotonic() < deadline, supervisor.output
        time.sleep(0.05)
    fetch(
        settings.database_url,
        f"""INSERT INTO "{schema}".jobs (type, payload)
            SELECT 'fan_parent', jsonb_build_object('base', i * 10)
            FROM generate_series(1, {PARENTS}) AS i""",
    )
    deadline = time.monotonic() + 120
    while True:
        [left] = fetch(
            settings.database_url,
            f"""SELECT count(*) AS n FROM "{schema}".jobs
                WHERE status NOT IN ('completed', 'failed', 'cancelled')""",
        )
        if left["n"] == 0:
            break
        assert time.monotonic() < deadline, f"{left['n']} jobs not ended"
        time.sleep(0.2)

    parents = fetch(
        settings.database_url,
        f"""SELECT id, status, payload, result::text AS result, attempts
            FROM "{schema}".jobs WHERE type = 'fan_parent'""",
    )
    assert len(parents) == PARENTS
    for parent in parents:
        base = int(json.loads(parent["payload"])["base"])
        assert parent["status"] == "completed", parent
        assert parent["result"] == str([base + i for i in range(5)]), parent
        assert parent["attempts"] == 1, parent  # waiting spent no attempt
    children = fetch(
        settings.database_url,
        f"""SELECT spawned_by, count(*) AS n, count(*) FILTER (WHERE status = 'completed') AS ok
            FROM "{schema}".jobs WHERE type = 'fan_child' GROUP BY spawned_by""",
    )
    assert {c["spawned_by"] for c in children} == {p["id"] for p in parents}
    assert {(c["n"], c["ok"]) for c in children} == {(5, 5)}  # none spawned twice
    ends = Counter(
        r["job_id"]
        for r in fetch(
            settings.database_url,
            f"""SELECT job_id FROM "{schema}".ledger WHERE what = 'parent ended'""",
        )
    )
    assert ends == {p["id"]: 1 for p in parents}  # each parent's end ran once
    # Parents locked in id order by every process's releases: no deadlock was retried.
    assert "deadlock" not in supervisor.output.lower()
    assert "Traceback" not in supervisor.output
