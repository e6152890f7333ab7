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

WIDTH, HEIGHT = 600, 140
PAD_LEFT, PAD_BOTTOM, PAD_TOP = 44, 18, 8


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


def _axis(top: float, unit: str) -> str:
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    parts = []
    for frac in (0.0, 0.5, 1.0):
        y = PAD_TOP + plot_h * (1 - frac)
        label = f"{top * frac:.3g}{unit}"
        parts.append(
            f'<line class="grid" x1="{PAD_LEFT}" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{PAD_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(label)}</text>"
        )
    return "".join(parts)


def _time_labels(rows: Sequence[MinuteRow], slot: float) -> str:
    parts = []
    for i in (0, len(rows) // 2, len(rows) - 1):
        x = PAD_LEFT + slot * i + slot / 2
        label = rows[i].at.strftime("%H:%M")
        anchor = "start" if i == 0 else "end" if i == len(rows) - 1 else "middle"
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{HEIGHT - 4}" text-anchor="{anchor}">{label}</text>'
        )
    return "".join(parts)


def _svg(title: str, summary: str, body: str) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'preserveAspectRatio="none" aria-label="{escape(title)}: {escape(summary)}">'
        f"<title>{escape(title)}</title>{body}</svg>"
    )


def throughput(rows: Sequence[MinuteRow], window: Window) -> Markup:
    """Completed (stacked under failed) jobs per bucket."""
    top = _nice_max(max((r.completed + r.failed for r in rows), default=0))
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    slot = (WIDTH - PAD_LEFT) / len(rows)
    bars = []
    for i, r in enumerate(rows):
        x = PAD_LEFT + slot * i + slot * 0.1
        w = slot * 0.8
        done_h = plot_h * r.completed / top
        fail_h = plot_h * r.failed / top
        base = PAD_TOP + plot_h
        if r.completed:
            bars.append(
                f'<rect class="completed" x="{x:.1f}" y="{base - done_h:.1f}" '
                f'width="{w:.1f}" height="{done_h:.1f}"/>'
            )
        if r.failed:
            bars.append(
                f'<rect class="failed" x="{x:.1f}" y="{base - done_h - fail_h:.1f}" '
                f'width="{w:.1f}" height="{fail_h:.1f}"/>'
            )
    completed = sum(r.completed for r in rows)
    failed = sum(r.failed for r in rows)
    summary = f"{completed} completed and {failed} failed over the {window.name}"
    title = f"Jobs finished per {'minute' if window.bucket_seconds == 60 else '15 minutes'}"
    return _svg(title, summary, _axis(top, "") + "".join(bars) + _time_labels(rows, slot))


def wait(rows: Sequence[MinuteRow], window: Window) -> Markup:
    """Wait p50 and p95 per bucket, as lines; a bucket with no job leaves a gap."""
    values = [v for r in rows for v in (r.wait_p50, r.wait_p95) if v is not None]
    top = _nice_max(max(values, default=0))
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    slot = (WIDTH - PAD_LEFT) / len(rows)
    lines = []
    for name in ("wait_p95", "wait_p50"):
        css = name.replace("_", "-")
        points = []
        for i, r in enumerate(rows):
            v = getattr(r, name)
            if v is None:
                continue
            x = PAD_LEFT + slot * i + slot / 2
            y = PAD_TOP + plot_h * (1 - max(v, 0) / top)
            points.append(f"{x:.1f},{y:.1f}")
            # A dot per bucket: a bucket between two empty ones has no line to show it.
            lines.append(f'<circle class="{css}" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>')
        if len(points) > 1:
            lines.append(f'<polyline class="{css}" points="{" ".join(points)}"/>')
    worst = max((r.wait_p95 for r in rows if r.wait_p95 is not None), default=None)
    summary = (
        "no job finished"
        if worst is None
        else f"the worst 95th percentile was {worst:.3g} s over the {window.name}"
    )
    return _svg("Wait before start (p50, p95)", summary,
                _axis(top, " s") + "".join(lines) + _time_labels(rows, slot))  # fmt: skip
