"""Schedules refused before they run: a bad cron expression or time zone, on a task or
in JOBQUEUE_CRON."""

from __future__ import annotations

import pytest

from jobqueue.app import JobQueue
from jobqueue.settings_parsing import ConfigError, cron_entries


def test_bad_schedules_are_refused_naming_the_field() -> None:
    jq = JobQueue(dsn="postgresql://unused")
    with pytest.raises(ValueError, match=r"^cron: 'every minute' is not a cron expression"):
        jq.task("a", cron="every minute")
    with pytest.raises(ValueError, match=r"^cron_timezone: unknown time zone 'Mars/Base'"):
        jq.task("a", cron="* * * * *", cron_timezone="Mars/Base")
    assert cron_entries("C", "report=0 9 * * 1-5@Europe/Paris;cleanup=*/10 * * * *")
    with pytest.raises(ConfigError, match=r"^C: 'report' is not type=cron expression"):
        cron_entries("C", "report")
    with pytest.raises(ConfigError, match=r"^C: cron: '61 \* \* \* \*' is not a cron"):
        cron_entries("C", "x=61 * * * *")
