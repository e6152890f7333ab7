"""The Schedules page: every schedule with its timing, state, next run and last job,
and the forms that create, edit, pause, resume, trigger and delete them (each done by
the HTTP API's route, jobqueue.ui.actions). ``/cron``, its former address, leads here.

A token restricted to queues or types sees only the schedules whose jobs it could
enqueue; the forms and buttons show only with ``schedules:control``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from jobqueue.auth import session
from jobqueue.model.schedule_timing import Missed
from jobqueue.model.schedules import ScheduleInfo
from jobqueue.model.tokens import Principal, Scope
from jobqueue.ui.actions import act, acting, first
from jobqueue.ui.rendering import jobqueue, render, within

router = APIRouter()
# The schedules the page lists, at most.
SHOWN = 1000


@router.get("/cron")
async def cron(request: Request) -> Response:
    return RedirectResponse(session.base_path(request) + "/schedules", 308)


@router.get("/schedules", response_class=HTMLResponse)
async def schedules(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    shown = await _reachable(request, who)
    return render(
        request,
        "schedules.html",
        who,
        schedules=shown,
        may_change=who.has(Scope.SCHEDULES),
        missed=[m.value for m in Missed],
        editing=None,
    )


@router.get("/schedules/{name}", response_class=HTMLResponse)
async def edit(request: Request, name: str) -> HTMLResponse:
    who = await session.principal(request)
    found = [s for s in await _reachable(request, who) if s.name == name]
    if not found or not who.has(Scope.SCHEDULES) or found[0].source != "api":
        raise HTTPException(404, detail=f"no schedule named {name!r} to edit")
    return render(
        request,
        "schedule_edit.html",
        who,
        editing=found[0],
        missed=[m.value for m in Missed],
    )


@router.post("/schedules")
async def create(request: Request) -> Response:
    _, fields = await acting(request)
    body = _definition(fields)
    body["name"] = (first(fields, "name") or "").strip()
    body["type"] = (first(fields, "type") or "").strip()
    await act(request, "/schedules", body)
    return within(request, None, "/schedules")


@router.post("/schedules/{name}")
async def update(request: Request, name: str) -> Response:
    _, fields = await acting(request)
    body = _definition(fields, editing=True)
    body["type"] = (first(fields, "type") or "").strip()
    await act(request, f"/schedules/{quote(name, safe='')}", body, method="PATCH")
    return within(request, None, "/schedules")


@router.post("/schedules/{name}/{action}")
async def action(request: Request, name: str, action: str) -> Response:
    await acting(request)
    path = f"/schedules/{quote(name, safe='')}"
    if action == "delete":
        await act(request, path, method="DELETE")
    elif action in ("pause", "resume", "trigger"):
        await act(request, f"{path}/{action}")
    else:
        raise HTTPException(404, detail=f"no such action: {action}")
    return within(request, None, "/schedules")


async def _reachable(request: Request, who: Principal) -> list[ScheduleInfo]:
    jq = jobqueue(request)
    return [
        s
        for s in await jq.schedules.list(limit=SHOWN)
        if not who.restricted or who.allows(queue=jq.schedules.queue_of(s), type=s.type)
    ]


def _definition(fields: dict[str, list[str]], *, editing: bool = False) -> dict[str, Any]:
    """The form as the API's body. A timing is the field filled in of the two; on an
    edit, an empty queue or priority goes back to the default, and empty tags or
    metadata remove them."""
    text = {k: (first(fields, k) or "").strip() for k in (
        "cron", "every", "timezone", "payload", "queue", "priority", "missed", "tags",
        "meta")}  # fmt: skip
    body: dict[str, Any] = {}
    if text["cron"]:
        body["cron"] = text["cron"]
    if text["every"]:
        body["every"] = text["every"]
    body["timezone"] = text["timezone"] or "UTC"
    body["missed"] = text["missed"] or "skip"
    if text["payload"]:
        try:
            body["payload"] = json.loads(text["payload"])
        except json.JSONDecodeError as exc:
            raise HTTPException(422, detail=f"payload: not JSON: {exc}") from None
    elif not editing:
        body["payload"] = {}
    if text["queue"] or editing:
        body["queue"] = text["queue"] or None
    if text["priority"] or editing:
        try:
            body["priority"] = int(text["priority"]) if text["priority"] else None
        except ValueError:
            raise HTTPException(422, detail="priority: a whole number") from None
    if text["tags"] or editing:
        body["tags"] = [t.strip() for t in text["tags"].split(",") if t.strip()] or None
    if text["meta"] or editing:
        try:
            body["meta"] = json.loads(text["meta"]) if text["meta"] else None
        except json.JSONDecodeError as exc:
            raise HTTPException(422, detail=f"meta: not JSON: {exc}") from None
    return body
