"""Failover: a primary and its synchronous standby, both in DATABASE_URL with
target_session_attrs=read-write. Under load over HTTP the primary crashes and the
standby is promoted: the workers and the API find the new primary by themselves, the
API answers 503 in between, and every job acknowledged with a 201, before or after,
completes, each attempt run once (tests/faults/failover_scenario.py)."""

from __future__ import annotations

import collections
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobqueue.logs import RECONNECT_FAILED
from tests.faults.failover_scenario import FailoverRun, fail_over_under_load
from tests.faults.replication import Replicated, ReplicationUnavailable

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# A loop's outage is one warning line; an [error], or a traceback but a failed
# attempt's own (its handler's error, logged with the attempt), is a bug.
EVENT = re.compile(r"^\S+Z \[(\w+)\s*\] (\S+)")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Replicated]:
    try:
        made = Replicated.make(tmp_path / "pg")
        pair = made.__enter__()
    except ReplicationUnavailable as exc:
        pytest.skip(f"a primary with a synchronous standby cannot be made here: {exc}")
    try:
        yield pair
    finally:
        made.__exit__(None, None, None)


def test_a_promoted_standby_takes_over_with_every_acknowledged_job(
    pair: Replicated, tmp_path: Path
) -> None:
    run = fail_over_under_load(pair, tmp_path)
    print_times(run)

    statuses = collections.Counter(a.status for a in run.answers)
    assert None not in statuses, "a request was not answered at all"
    assert set(statuses) == {201, 503}, statuses  # never a 500
    # Sent once the primary was gone, answered before the standby was promoted.
    between = [a.status for a in run.answers if run.stopped <= a.sent <= a.answered < run.promoted]
    assert between, "no request was answered while no host accepted writes"
    assert set(between) == {503}, collections.Counter(between)
    for a in run.answers:
        if a.status == 503:  # nothing stored, or perhaps: never a 201 for a lost job
            assert a.body["stored"] in (False, "unknown"), a.body
    assert [a for a in run.answers if a.status == 201 and a.sent >= run.promoted], (
        "the API stored no job on the new primary"
    )
    assert run.first_completion is not None, "no job completed on the new primary"

    assert len(run.accepted) == len(set(run.accepted))
    assert set(run.statuses) == set(run.accepted), "an acknowledged job is missing"
    assert set(run.statuses.values()) == {"completed"}, collections.Counter(run.statuses.values())
    attempts = collections.Counter(run.ledger)
    assert [key for key, n in attempts.items() if n > 1] == []  # no attempt ran twice
    assert set(run.accepted) <= {job for job, _ in run.ledger}  # every job ran

    # The supervisor's LISTEN, relayed to its workers, is back on the new primary.
    assert "listener reconnected; wake-ups by NOTIFY again" in run.logs["workers"]
    assert run.exit_codes == {"workers": 0, "api": 0}, run.exit_codes
    assert "exited with code" not in run.logs["workers"]  # no worker process died
    for name, log in run.logs.items():
        bad = unexplained(log)
        assert bad == [], f"{name}: {bad[:5]}\n{log[-3000:]}"


def unexplained(log: str) -> list[str]:
    """The lines of ``log`` that say something went wrong that no outage explains."""
    bad, event, theirs = [], "", False
    for line in log.splitlines():
        if found := EVENT.match(line):
            level, event = found.groups()
            # The ledger app's own asyncpg pool reconnecting: jobqueue leaves an
            # application's pools to log as asyncpg does, traceback included; its own
            # pools' failed reconnections are one line ending with the error.
            theirs = line.rstrip().endswith(f"{RECONNECT_FAILED}; retrying [asyncpg.pool]")
            if level in ("error", "critical") or "InternalClientError" in line:
                bad.append(line)
        elif (
            line.startswith("Traceback")
            and event not in ("job.retried", "job.failed")
            and not theirs
        ):
            bad.append(f"a traceback after {event}")
    return bad


def print_times(run: FailoverRun) -> None:
    def s(seconds: float | None) -> str:
        return "never" if seconds is None else f"{seconds:.2f}s"

    statuses = collections.Counter(a.status for a in run.answers)
    print(
        f"\nfailover: {len(run.accepted)} jobs acknowledged, answers {dict(statuses)}; "
        f"primary stopped, standby promoted {s(run.outage)} later; "
        f"from the stop: first 201 {s(run.first_201)}, first job completed "
        f"{s(run.first_completion)}; from the promotion: first 201 "
        f"{s(run.since_promotion(run.first_201))}, first job completed "
        f"{s(run.since_promotion(run.first_completion))}"
    )
