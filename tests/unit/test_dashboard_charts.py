"""The dashboard's SVG charts: a bucket per minute (or quarter hour) whether or not a
job finished in it, round axes, and no style attribute (the CSP forbids them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobqueue.db.records import MinuteRow
from jobqueue.ui import charts

NOW = datetime(2026, 12, 1, 10, 30, 20, tzinfo=UTC)


def test_the_hour_has_sixty_buckets_ending_with_the_current_minute() -> None:
    at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    rows = charts.filled([MinuteRow(at, 5, 1, 0.1, 0.9)], charts.HOUR, NOW)
    assert len(rows) == 60
    assert (rows[0].at, rows[-1].at) == (NOW.replace(second=0) - timedelta(minutes=59),
                                         NOW.replace(second=0))  # fmt: skip
    assert [r.completed for r in rows if r.completed] == [5]
    assert sum(r.failed for r in rows) == 1


def test_the_day_has_ninety_six_quarter_hours() -> None:
    rows = charts.filled([], charts.DAY, NOW)
    assert len(rows) == 96
    assert rows[-1].at == datetime(2026, 12, 1, 10, 30, tzinfo=UTC)


def test_throughput_bars_and_summary() -> None:
    at = NOW.replace(second=0)
    rows = charts.filled([MinuteRow(at, 7, 2, None, None)], charts.HOUR, NOW)
    svg = str(charts.throughput(rows, charts.HOUR))
    assert svg.count('<rect class="completed"') == 1
    assert svg.count('<rect class="failed"') == 1
    assert "7 completed and 2 failed over the last hour" in svg
    assert ">10</text>" in svg  # the axis rounds 9 up to 10
    assert "style=" not in svg


def test_wait_lines_leave_gaps_and_scale_below_a_second() -> None:
    at = NOW.replace(second=0)
    rows = charts.filled(
        [MinuteRow(at - timedelta(minutes=1), 3, 0, 0.01, 0.04), MinuteRow(at, 3, 0, 0.02, 0.05)],
        charts.HOUR,
        NOW,
    )
    svg = str(charts.wait(rows, charts.HOUR))
    assert svg.count('class="dot wait-p95"') == 2
    assert svg.count("<polyline") == 2
    assert ">0.05 s</text>" in svg  # the top of the axis: not 1 s for 50 ms waits
    assert "the worst 95th percentile was 0.05 s" in svg
    gap = charts.filled(
        [MinuteRow(at - timedelta(minutes=m), 1, 0, 0.01, 0.02) for m in (0, 1, 3, 4)],
        charts.HOUR,
        NOW,
    )
    assert str(charts.wait(gap, charts.HOUR)).count("<polyline") == 4  # two lines, each broken
    empty = str(charts.wait(charts.filled([], charts.HOUR, NOW), charts.HOUR))
    assert "no job finished" in empty
    assert "<polyline" not in empty
