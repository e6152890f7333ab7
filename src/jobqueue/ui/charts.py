"""The overview's charts, drawn on the server as SVG: no chart library, no script.

Shapes carry classes, not style attributes (the Content-Security-Policy forbids
inline styles); ui.css colours them, dark mode included. Every chart has a title and
a text summary for screen readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from jobqueue.db.records import MinuteRow

# The plot is an inner SVG stretched to the chart's width (its shapes scale, their
# strokes do not); the labels sit in the outer SVG, in CSS pixels, so that text is
# never squeezed on a phone. PLOT_HEIGHT is in pixels too (ui.css gives the chart
# HEIGHT px), so vertical positions are the same in both.
WIDTH = 600  # the plot's own width units, stretched to whatever the page gives
HEIGHT = 160
PLOT_HEIGHT = 140
PAD_TOP = 14  # room for the top label above the top grid line


@dataclass(frozen=True)
class Window:
    """A chart's span: ``buckets`` of ``bucket_seconds`` each, ending now."""

    name: str
    bucket_seconds: int
    buckets: int

    def since(self, now: datetime) -> datetime:
        end = _floor(now, self.bucket_seconds)
        return end - timedelta(seconds=self.bucket_seconds * (self.buckets - 1))


HOUR = Window("last hour", 60, 60)
DAY = Window("last day", 900, 96)
WINDOWS = {"hour": HOUR, "day": DAY}


def _floor(t: datetime, seconds: int) -> datetime:
    epoch = int(t.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, t.tzinfo)


def filled(rows: Sequence[MinuteRow], window: Window, now: datetime) -> list[MinuteRow]:
    """One row per bucket of the window, zeros where no job finished."""
    start = window.since(now)
    by_time = {int(r.at.timestamp()): r for r in rows}
    out = []
    for i in range(window.buckets):
        at = start + timedelta(seconds=window.bucket_seconds * i)
        out.append(by_time.get(int(at.timestamp()), MinuteRow(at, 0, 0, None, None)))
    return out


def _nice_max(value: float) -> float:
    """A round axis maximum at or above ``value``."""
    if value <= 0:
        return 1.0
    step = 1.0
    while step > value:
        step /= 10
    while step * 10 <= value:
        step *= 10
    for m in (1, 2, 5, 10):
        if value <= m * step:
            return m * step
    return 10 * step


def _y(value: float, top: float) -> float:
    return PAD_TOP + (PLOT_HEIGHT - PAD_TOP) * (1 - value / top)


def _grid(top: float) -> str:
    return "".join(
        f'<line class="grid" x1="0" x2="{WIDTH}" y1="{_y(top * f, top):.1f}" '
        f'y2="{_y(top * f, top):.1f}"/>'
        for f in (0.0, 0.5, 1.0)
    )


def _labels(rows: Sequence[MinuteRow], top: float, unit: str) -> str:
    """The value of each grid line, just above it at the left, and three times."""
    parts = [
        f'<text class="tick" x="2" y="{_y(top * f, top) - 3:.1f}">'
        f"{escape(f'{top * f:.3g}{unit}')}</text>"
        for f in (0.5, 1.0)
    ]
    for i, x, anchor in ((0, "0%", "start"), (len(rows) // 2, "50%", "middle"),
                         (len(rows) - 1, "100%", "end")):  # fmt: skip
        parts.append(
            f'<text class="tick" x="{x}" y="{HEIGHT - 4}" text-anchor="{anchor}">'
            f"{rows[i].at.strftime('%H:%M')}</text>"
        )
    return "".join(parts)


def _svg(title: str, summary: str, plot: str, labels: str) -> Markup:
    return Markup(
        f'<svg class="chart" width="100%" height="{HEIGHT}" role="img" '
        f'aria-label="{escape(title)}: {escape(summary)}"><title>{escape(title)}</title>'
        f'<svg width="100%" height="{PLOT_HEIGHT}" viewBox="0 0 {WIDTH} {PLOT_HEIGHT}" '
        f'preserveAspectRatio="none">{plot}</svg>{labels}</svg>'
    )


def throughput(rows: Sequence[MinuteRow], window: Window) -> Markup:
    """Completed (stacked under failed) jobs per bucket."""
    top = _nice_max(max((r.completed + r.failed for r in rows), default=0))
    slot = WIDTH / len(rows)
    bars = []
    for i, r in enumerate(rows):
        x, w = slot * i + slot * 0.1, slot * 0.8
        done_top, fail_top = _y(r.completed, top), _y(r.completed + r.failed, top)
        if r.completed:
            bars.append(
                f'<rect class="completed" x="{x:.1f}" y="{done_top:.1f}" width="{w:.1f}" '
                f'height="{_y(0, top) - done_top:.1f}"/>'
            )
        if r.failed:
            bars.append(
                f'<rect class="failed" x="{x:.1f}" y="{fail_top:.1f}" width="{w:.1f}" '
                f'height="{done_top - fail_top:.1f}"/>'
            )
    completed = sum(r.completed for r in rows)
    failed = sum(r.failed for r in rows)
    summary = f"{completed} completed and {failed} failed over the {window.name}"
    title = f"Jobs finished per {'minute' if window.bucket_seconds == 60 else '15 minutes'}"
    return _svg(title, summary, _grid(top) + "".join(bars), _labels(rows, top, ""))


def wait(rows: Sequence[MinuteRow], window: Window) -> Markup:
    """Wait p50 and p95 per bucket, as lines; a bucket with no job leaves a gap."""
    values = [v for r in rows for v in (r.wait_p50, r.wait_p95) if v is not None]
    top = _nice_max(max(values, default=0))
    slot = WIDTH / len(rows)
    lines = []
    for name in ("wait_p95", "wait_p50"):
        css = name.replace("_", "-")
        segments: list[list[str]] = [[]]
        for i, r in enumerate(rows):
            v = getattr(r, name)
            if v is None:
                segments.append([])  # no job finished: the line breaks here
                continue
            x, y = slot * i + slot / 2, _y(max(v, 0), top)
            segments[-1].append(f"{x:.1f},{y:.1f}")
            # A dot per bucket (a line of no length with round caps: a circle would be
            # stretched), so that a bucket between two empty ones shows.
            lines.append(
                f'<line class="dot {css}" x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y:.1f}"/>'
            )
        lines.extend(
            f'<polyline class="{css}" points="{" ".join(points)}"/>'
            for points in segments
            if len(points) > 1
        )
    worst = max((r.wait_p95 for r in rows if r.wait_p95 is not None), default=None)
    summary = (
        "no job finished"
        if worst is None
        else f"the worst 95th percentile was {worst:.3g} s over the {window.name}"
    )
    title = "Wait before start (p50, p95)"
    return _svg(title, summary, _grid(top) + "".join(lines), _labels(rows, top, " s"))
