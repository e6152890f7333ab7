"""The queues' pages: the overview (every queue, its counts and charts), one queue's
page (its counts, limits, last hour and waiting jobs), and a queue's actions: pause,
resume, and its limits form.

A token restricted to some queues sees only those: the others are left out, and a
queue's page is a 404 as if the queue did not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse

from jobqueue.app import JobQueue
from jobqueue.auth import access, session
from jobqueue.model.limits import LIMIT_FIELDS
from jobqueue.model.tokens import Scope
from jobqueue.settings_parsing import queue_limits
from jobqueue.ui import charts
from jobqueue.ui.actions import act, acting, first
from jobqueue.ui.rendering import jobqueue, render, within

router = APIRouter()
# Pending jobs due later are counted up to this many per queue (queues_later.sql).
LATER_COUNTED = 10_000
# The waiting jobs a queue's page lists.
WAITING_SHOWN = 25


@router.get("/", response_class=HTMLResponse)
async def overview(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    jq = jobqueue(request)
    window = charts.WINDOWS.get(request.query_params.get("chart", "hour"), charts.HOUR)
    now = datetime.now(UTC)
    rows = await jq.inspect.queue_minutes(
        since=window.since(now),
        queues=None if who.queues is None else sorted(who.queues),
        bucket_seconds=window.bucket_seconds,
    )
    series = charts.filled(rows, window, now)
    queues = access.queues_shown(await jq.queues(), who)
    return render(
        request,
        "overview.html",
        who,
        queues=queues,
        later=await later_counts(jq, [q.name for q in queues]),
        limits=queue_limits(jq.settings.queues),
        may_pause=who.has(Scope.QUEUES),
        chart=next(k for k, v in charts.WINDOWS.items() if v is window),
        throughput=charts.throughput(series, window),
        wait=charts.wait(series, window),
    )


async def later_counts(jq: JobQueue, queues: list[str]) -> dict[str, dict[str, str]]:
    """Each queue's scheduled and retrying jobs, as the pages show them: a count, or
    that count and more ("10,000+") when the bound was reached."""
    counted = await jq.inspect.queues_later(queues, limit=LATER_COUNTED + 1)
    shown = {}
    for name, (scheduled, retrying) in counted.items():
        more = "+" if scheduled + retrying > LATER_COUNTED else ""
        shown[name] = {"scheduled": f"{scheduled:,}{more}", "retrying": f"{retrying:,}{more}"}
    return shown


@router.get("/queues/{name}", response_class=HTMLResponse)
async def queue_page(request: Request, name: str) -> HTMLResponse:
    """One queue: its counts, limits and state, its last hour, and its waiting jobs."""
    who = await session.principal(request)
    jq = jobqueue(request)
    if who.queues is not None and name not in who.queues:
        raise HTTPException(404, detail=f"no queue {name!r}")
    try:
        info = await jq.queue(name)
    except ValueError:
        raise HTTPException(404, detail=f"no queue {name!r}") from None
    now = datetime.now(UTC)
    window = charts.HOUR
    rows = await jq.inspect.queue_minutes(
        since=window.since(now), queues=[name], bucket_seconds=window.bucket_seconds
    )
    series = charts.filled(rows, window, now)
    waiting = await jq.inspect.queue_waiting(name, limit=WAITING_SHOWN)
    return render(
        request,
        "queue.html",
        who,
        queue=info,
        later=(await later_counts(jq, [name])).get(name),
        limit=queue_limits(jq.settings.queues).get(name),
        may_pause=who.has(Scope.QUEUES),
        completed=sum(r.completed for r in series),
        failed=sum(r.failed for r in series),
        throughput=charts.throughput(series, window),
        wait=charts.wait(series, window),
        waiting=[access.shown(j, who) for j in waiting if who.allows(queue=j.queue, type=j.type)],
        waiting_shown=WAITING_SHOWN,
    )


@router.post("/queues/{name}/pause")
async def pause(request: Request, name: str) -> Response:
    _, fields = await acting(request)
    await act(request, f"/queues/{name}/pause")
    return within(request, first(fields, "next"), "/")


@router.post("/queues/{name}/resume")
async def resume(request: Request, name: str) -> Response:
    _, fields = await acting(request)
    await act(request, f"/queues/{name}/resume")
    return within(request, first(fields, "next"), "/")


@router.post("/queues/{name}/limits")
async def set_limits(request: Request, name: str) -> Response:
    """The limits form: each field given sets its limit, an empty one removes it."""
    _, fields = await acting(request)
    body: dict[str, int | str | None] = {}
    for field in LIMIT_FIELDS:
        if field in fields:
            value = (first(fields, field) or "").strip()
            body[field] = int(value) if value.isdigit() else value or None
    await act(request, f"/queues/{name}", body, method="PATCH")
    return within(request, first(fields, "next"), "/")
