"""`jobqueue schedules`: made, changed, paused, triggered and deleted from the command
line, each refusal one line and a non-zero exit with nothing stored."""

from __future__ import annotations

import json

from tests.conftest import jobqueue


def test_schedules_are_managed_from_the_command_line(env: dict[str, str]) -> None:
    # No worker runs and nothing is declared: a schedule of a type nothing runs would
    # enqueue, at every tick, a job that waits for good. Declared, it is taken.
    unrun = jobqueue(env, "schedules", "create", "nightly", "report", "--cron", "0 3 * * *")
    assert unrun.returncode == 2, unrun.stdout
    assert unrun.stderr == (
        "jobqueue: error: no live worker of queue default has a handler for type 'report' "
        "(known types: none), and it is not declared (jobqueue types add); --force stores "
        "it anyway\n"
    )
    assert jobqueue(env, "schedules", "list").stdout.strip() == "no schedules"
    for declared in ("report", "noop"):
        assert jobqueue(env, "types", "add", declared).returncode == 0
    made = jobqueue(
        env, "schedules", "create", "nightly", "report", "--cron", "0 3 * * *",
        "--timezone", "Europe/Berlin", "--payload", '{"format": "pdf"}', "--json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    shown = json.loads(made.stdout)
    assert (shown["cron"], shown["timezone"], shown["payload"]) == (
        "0 3 * * *", "Europe/Berlin", {"format": "pdf"},
    )  # fmt: skip

    for args, words in [
        (["create", "bad", "noop", "--every", "0s"], "--every: an interval is at least 1s"),
        (["create", "bad", "noop", "--cron", "0 3 * *"], "--cron: '0 3 * *' is not a cron"),
        (["create", "bad", "noop", "--every", "1m", "--timezone", "Mars/X"], "--timezone:"),
        (["create", "bad", "noop", "--every", "1m", "--payload", "[1]"], "--payload:"),
        (["create", "bad", "no op", "--every", "1m"], "no live worker"),
        (["create", "bad", "no op", "--every", "1m", "--force"], ""),  # a space is fine
        (["update", "bad", "--type", "reprot"], "type 'reprot'"),
        (["create", "nightly", "noop", "--every", "1m"], "exists"),
        (["update", "nightly"], "name at least one thing to change"),
        (["delete", "missing"], "no schedule named 'missing'"),
    ]:
        done = jobqueue(env, "schedules", *args)
        if not words:
            assert done.returncode == 0, done.stderr
            continue
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert words in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr

    changed = jobqueue(env, "schedules", "update", "nightly", "--every", "5m", "--json")
    assert json.loads(changed.stdout)["every"] == "5m"
    paused = jobqueue(env, "schedules", "pause", "nightly")
    assert paused.returncode == 0
    assert "state: paused" in paused.stdout
    triggered = jobqueue(env, "schedules", "trigger", "nightly", "--json")
    assert json.loads(triggered.stdout)["payload"] == {"format": "pdf"}
    listed = jobqueue(env, "schedules", "list")
    assert "nightly" in listed.stdout
    assert "every 5m" in listed.stdout
    assert jobqueue(env, "schedules", "delete", "nightly").returncode == 0
    audit = jobqueue(env, "audit", "--json")
    actions = [e["action"] for e in json.loads(audit.stdout)]
    oldest = [a for a in actions[::-1] if a.startswith("schedule.")][:2]
    assert oldest == ["schedule.create", "schedule.create"]  # nightly, "bad" (forced)
    assert "schedule.delete" in actions
