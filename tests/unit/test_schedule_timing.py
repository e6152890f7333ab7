"""When schedules tick (jobqueue.model.schedule_timing): intervals written and read, cron in
a time zone, and which missed ticks each ``missed`` runs, bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobqueue.model.schedule_timing import (
    MISSED_ALL_MAX,
    ON_TIME_SECONDS,
    Missed,
    Timing,
    check_name,
    format_every,
    parse_every,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "seconds"), [("1s", 1), ("30s", 30), ("5m", 300), ("2h", 7200)])
def test_intervals_are_read_and_written_back(text: str, seconds: int) -> None:
    assert parse_every(text) == seconds
    assert format_every(seconds) == text
    assert format_every(90) == "90s"
    assert format_every(3600) == "1h"


@pytest.mark.parametrize("text", ["0s", "1.5s", "500ms", "1d", "", "s", "-1s", "9999h"])
def test_bad_intervals_are_refused_naming_every(text: str) -> None:
    with pytest.raises(ValueError, match=r"^every: "):
        parse_every(text)


def test_timing_needs_cron_or_every_a_known_zone_and_a_valid_expression() -> None:
    for kwargs, field in [
        ({"cron": None, "every_seconds": None}, "cron"),
        ({"cron": "* * * * *", "every_seconds": 5}, "cron"),
        ({"cron": "0 25 * * *", "every_seconds": None}, "cron"),
        ({"cron": "* * * * *", "every_seconds": None, "timezone": "Nowhere/Land"}, "timezone"),
    ]:
        with pytest.raises(ValueError, match=rf"^{field}: "):
            Timing(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^name: "):
        check_name("has space")


def test_cron_ticks_in_its_zone_across_a_daylight_saving_change() -> None:
    paris = Timing(cron="0 9 * * *", every_seconds=None, timezone="Europe/Paris")
    runs = paris.next_runs(paris.first(datetime(2026, 10, 23, 12, tzinfo=UTC)))
    # 09:00 in Paris is 07:00 UTC in summer time (24 October), 08:00 from the 25th.
    assert [r.hour for r in runs] == [7, 8, 8, 8, 8]
    assert all(r.tzinfo == UTC for r in runs)


def test_one_due_tick_runs_under_every_policy() -> None:
    minutely = Timing(cron="* * * * *", every_seconds=None)
    for missed in Missed:
        due = minutely.due(T0, T0 + timedelta(seconds=2), missed)
        assert (due.run, due.skipped, due.upcoming) == ([T0], 0, T0 + timedelta(minutes=1))


def test_missed_ticks_by_policy_and_all_is_bounded() -> None:
    every = Timing(cron=None, every_seconds=10)
    now = T0 + timedelta(hours=1, seconds=75)  # 366 ticks due, the latest 5 s ago
    skip, once, all_ = (every.due(T0, now, m) for m in Missed)
    latest = T0 + timedelta(hours=1, seconds=70)
    assert skip.run == once.run == [latest]  # on time: it runs under `skip` too
    assert len(all_.run) == MISSED_ALL_MAX
    assert all_.run[-1] == latest
    assert all_.more_skipped
    assert all_.run == sorted(all_.run)
    assert {d.upcoming for d in (skip, once, all_)} == {latest + timedelta(seconds=10)}

    hourly = Timing(cron="0 * * * *", every_seconds=None)
    late = T0 + timedelta(hours=3, seconds=ON_TIME_SECONDS + 1)
    assert hourly.due(T0, late, Missed.SKIP).run == []
    assert hourly.due(T0, late, Missed.SKIP).skipped == 4
    assert hourly.due(T0, late, Missed.ONCE).run == [T0 + timedelta(hours=3)]
    assert len(hourly.due(T0, late, Missed.ALL).run) == 4


def test_a_schedule_down_for_a_year_is_caught_up_without_walking_every_tick() -> None:
    minutely = Timing(cron="* * * * *", every_seconds=None)
    now = T0 + timedelta(days=365, seconds=30)
    due = minutely.due(T0, now, Missed.ALL)
    assert len(due.run) == MISSED_ALL_MAX
    assert due.run[-1] == T0 + timedelta(days=365)
    assert due.upcoming == T0 + timedelta(days=365, minutes=1)
