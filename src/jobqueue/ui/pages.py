"""The dashboard's pages and actions.

Every page reads through the same seams as the HTTP API: the Authenticator for who
the browser acts as, jobqueue.auth.access for what that token may see (its queues and
types; payloads redacted without payloads:read), and the JobQueue for the data, which
comes from the counters, keyset pages and primary-key reads only. Every POST checks
the CSRF token, then is done by the HTTP API's own route (jobqueue.ui.inprocess), which
checks the scope; the buttons of an action a token may not take are not shown either.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2
from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse

from jobqueue.app import JobQueue
from jobqueue.auth import access, session
from jobqueue.config import queue_limits
from jobqueue.maintenance.leader import ROLE as LEADER_ROLE
from jobqueue.model.job import (
    FINAL_STATES,
    RETRYABLE_STATES,
    Job,
    JobStatus,
)
from jobqueue.model.limits import LIMIT_FIELDS
from jobqueue.model.tokens import Principal, Scope
from jobqueue.task import schedules
from jobqueue.ui import audit, bulk, charts, inprocess
from jobqueue.ui.live import Hub
from jobqueue.ui.tracebacks import handler_frames
from jobqueue.workflows.model import Workflow

router = APIRouter()
PAGE_SIZE = 50
# Pending jobs due later are counted up to this many per queue (queues_later.sql).
LATER_COUNTED = 10_000
# The waiting jobs a queue's page lists, and the running jobs the Workers page lists.
WAITING_SHOWN = 25
RUNNING_SHOWN = 1_000
# The State filter's views of pending jobs by when they run (jobs_page.sql).
DUE_VIEWS = {
    "due": "pending, due now",
    "scheduled": "pending, scheduled for later",
    "retrying": "pending, waiting to retry",
}

templates = jinja2.Environment(
    loader=jinja2.PackageLoader("jobqueue.ui", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def jobqueue(request: Request) -> JobQueue:
    jq: JobQueue = request.app.state.jobqueue
    return jq


def hub(request: Request) -> Hub:
    found: Hub = request.app.state.hub
    return found


# -- rendering -------------------------------------------------------------------------


def ago(then: datetime | None, now: datetime | None = None) -> str:
    if then is None:
        return "—"
    seconds = ((now or datetime.now(UTC)) - then).total_seconds()
    return seconds_text(seconds) + (" ago" if seconds >= 0 else " from now")


def seconds_text(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = abs(seconds)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def stamp(value: datetime | None) -> str:
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


templates.filters.update(ago=ago, seconds=seconds_text, stamp=stamp, handler_frames=handler_frames)


def render(
    request: Request, name: str, who: Principal | None, status: int = 200, **context: Any
) -> HTMLResponse:
    session.prepare(request)
    page = templates.get_template(name).render(
        root=session.base_path(request),
        who=who,
        csrf=session.csrf_token(request),
        layout="partial.html" if request.headers.get("x-partial") == "1" else "base.html",
        live=context.pop("live", True),
        path=request.url.path,
        now=datetime.now(UTC),
        **context,
    )
    response = HTMLResponse(page, status)
    response.headers["cache-control"] = "no-store"
    session.set_browser_secret(request, response)
    return response


def within(request: Request, target: str | None, default: str) -> RedirectResponse:
    """303 to ``target``, a path within the dashboard (anything else: ``default``)."""
    return RedirectResponse(session.base_path(request) + local(target, default), 303)


def local(target: str | None, default: str) -> str:
    """``target`` if it is a path on this site, else ``default``: a browser reads
    ``//host`` and ``/\\host`` as another site."""
    if not target or not target.startswith("/") or target[1:2] in ("/", "\\"):
        return default
    return target


async def form(request: Request) -> dict[str, list[str]]:
    """The urlencoded form of a POST (no multipart parser needed for these forms)."""
    return parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)


def first(fields: dict[str, list[str]], name: str) -> str | None:
    values = fields.get(name)
    return values[0] if values else None


async def acting(request: Request) -> tuple[Principal, dict[str, list[str]]]:
    """Who a POST acts as, once its CSRF token is checked; the API checks the scope."""
    who = await session.principal(request, None)
    fields = await form(request)
    session.check_csrf(request, first(fields, session.CSRF_FIELD))
    return who, fields


async def act(request: Request, path: str, body: Any = None, method: str = "POST") -> Any:
    """POST (or ``method``) ``path`` to the HTTP API (jobqueue.ui.inprocess) as this
    session; its answer, or its refusal raised as the error page (its 401 as the
    sign-in form)."""
    status, answer = await inprocess.call(
        request.app.state.api,
        method,
        path,
        token=request.cookies.get(session.SESSION_COOKIE),
        client=session.client_of(request),
        body=body,
    )
    if status == 401:
        raise session.SignInNeeded
    if status >= 400:
        detail = answer.get("detail") if isinstance(answer, dict) else None
        if isinstance(detail, list):  # a 422's field errors
            detail = "; ".join(
                str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail
            )
        raise HTTPException(status, detail=str(detail or f"the API answered {status}"))
    return answer


# -- sign-in -----------------------------------------------------------------------------


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request) -> HTMLResponse:
    is_open = session.authenticator(request).is_open
    return render(request, "login.html", None, live=False, is_open=is_open, problem=None)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    fields = await form(request)
    session.check_csrf(request, first(fields, session.CSRF_FIELD))
    token = (first(fields, "token") or "").strip()
    problem = None
    if not token:
        problem = "Paste an API token."
    else:
        header = f"Bearer {token}"
        try:
            who = await session.authenticator(request).authenticate(
                header, session.client_of(request), None
            )
        except HTTPException as exc:
            problem = str(exc.detail)
        else:
            if not who.has(Scope.READ):
                problem = f"This token lacks the scope {Scope.READ}, which the dashboard needs."
    if problem is not None:
        return render(request, "login.html", None, 401, live=False, is_open=False, problem=problem)
    response = within(request, "/", "/")
    session.sign_in(request, response, token)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    fields = await form(request)
    session.check_csrf(request, first(fields, session.CSRF_FIELD))
    response = within(request, "/login", "/login")
    session.sign_out(request, response)
    return response


# -- overview ----------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
async def overview(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    jq = jobqueue(request)
    window = charts.WINDOWS.get(request.query_params.get("chart", "hour"), charts.HOUR)
    now = datetime.now(UTC)
    rows = await (await jq.store()).queue_minutes_read(
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
    counted = await (await jq.store()).queues_later(queues=queues, limit=LATER_COUNTED + 1)
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
    store = await jq.store()
    now = datetime.now(UTC)
    window = charts.HOUR
    rows = await store.queue_minutes_read(
        since=window.since(now), queues=[name], bucket_seconds=window.bucket_seconds
    )
    series = charts.filled(rows, window, now)
    waiting = await store.queue_waiting(queue=name, limit=WAITING_SHOWN)
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


# -- jobs ----------------------------------------------------------------------------------


class BadFilter(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def _status(raw: str | None) -> JobStatus | None:
    if not raw:
        return None
    try:
        return JobStatus(raw)
    except ValueError:
        known = ", ".join(JobStatus)
        raise BadFilter("status", f"unknown state {raw!r}; the states are {known}") from None


def _time(field: str, raw: str | None) -> datetime | None:
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise BadFilter(field, f"not a date and time: {raw!r}") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _int(field: str, raw: str | None) -> int | None:
    if not raw:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 2**63:
        raise BadFilter(field, f"not a job id: {raw!r}")
    return int(raw)


def _filters(request: Request) -> dict[str, Any]:
    q = request.query_params
    view = q.get("status")
    due = view if view in DUE_VIEWS else None
    return {
        "status": JobStatus.PENDING if due else _status(view),
        "due": due,
        "queue": q.get("queue") or None,
        "type": q.get("type") or None,
        "since": _time("since", q.get("since")),
        "until": _time("until", q.get("until")),
        "after": _int("after", q.get("after")),
        "id": _int("id", q.get("id")),
    }


def _query(**params: Any) -> str:
    kept = {k: str(v) for k, v in params.items() if v not in (None, "")}
    return urlencode(kept)


@router.get("/jobs", response_class=HTMLResponse)
async def jobs(request: Request) -> Response:
    who = await session.principal(request)
    jq = jobqueue(request)
    try:
        f = _filters(request)
    except BadFilter as exc:
        return render(request, "error.html", who, 422, live=False, message=str(exc))
    if f["id"] is not None:
        return within(request, f"/jobs/{f['id']}", "/jobs")
    if f["since"] is not None and f["until"] is not None and f["since"] >= f["until"]:
        message = "until: must be after since"
        return render(request, "error.html", who, 422, live=False, message=message)
    found: list[Job] = []
    scope = access.reach(who, queue=f["queue"], type=f["type"])
    if scope is not None:
        found = await (await jq.store()).jobs_page(
            status=f["status"],
            types=scope[1],
            queues=scope[0],
            created_since=f["since"],
            created_before=f["until"],
            before_id=f["after"],
            limit=PAGE_SIZE,
            due=f["due"],
        )
    base = {"status": f["due"] or f["status"], "queue": f["queue"], "type": f["type"]}
    raw = request.query_params
    timed = {"since": raw.get("since"), "until": raw.get("until")}
    may_control = who.has(Scope.CONTROL)
    bulk_links = {}
    # A bulk action filters by state, queue and type only: not by time, nor by when
    # a pending job is due.
    if may_control and f["since"] is None and f["until"] is None and f["due"] is None:
        for action in bulk.ACTIONS:
            if bulk.statuses(action, f["status"]):
                bulk_links[action] = _query(action=action, **base)
    return render(
        request,
        "jobs.html",
        who,
        jobs=[access.shown(j, who) for j in found],
        filters=f,
        raw=raw,
        states=list(JobStatus),
        due_views=DUE_VIEWS,
        state_choice=base["status"] or "",
        queue_names=[q.name for q in access.queues_shown(await jq.queues(), who)],
        next_query=_query(after=found[-1].id, **base, **timed) if len(found) == PAGE_SIZE else None,
        first_query=_query(**base, **timed) if f["after"] is not None else None,
        may_control=may_control,
        bulk_links=bulk_links,
        this_page=request.url.path + ("?" + request.url.query if request.url.query else ""),
    )


def _bulk_params(source: Any) -> dict[str, Any]:
    action = source.get("action")
    if action not in bulk.ACTIONS:
        raise BadFilter("action", "must be retry or cancel")
    return {
        "action": action,
        "status": _status(source.get("status")),
        "queue": source.get("queue") or None,
        "type": source.get("type") or None,
    }


@router.get("/jobs/bulk", response_class=HTMLResponse)
async def bulk_confirm(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    try:
        params = _bulk_params(request.query_params)
    except BadFilter as exc:
        return render(request, "error.html", who, 422, live=False, message=str(exc))
    matched = await bulk.count(jobqueue(request), who, **params)
    states = bulk.statuses(params["action"], params["status"])
    return render(
        request,
        "bulk.html",
        who,
        live=False,
        params=params,
        states=states,
        matched=matched,
        may_control=who.has(Scope.CONTROL),
        back=_query(**{k: params[k] for k in ("status", "queue", "type")}),
    )


@router.post("/jobs/bulk", response_class=HTMLResponse)
async def bulk_run(request: Request) -> HTMLResponse:
    who, fields = await acting(request)
    try:
        params = _bulk_params({k: v[0] for k, v in fields.items()})
    except BadFilter as exc:
        return render(request, "error.html", who, 422, live=False, message=str(exc))
    path, body = bulk.api_request(
        params["action"], status=params["status"], queue=params["queue"], type=params["type"]
    )
    answer = await act(request, path, body)
    if params["action"] == "retry":
        message = f"{answer['retried']:,} jobs retried."
    else:
        message = (
            f"{answer['cancelled']:,} jobs cancelled, {answer['requested']:,} running "
            "jobs asked to stop."
        )
    back = _query(**{k: params[k] for k in ("status", "queue", "type")})
    return render(request, "done.html", who, live=False, message=message, refused=[], back=back)


@router.post("/jobs/selected", response_class=HTMLResponse)
async def selected_run(request: Request) -> HTMLResponse:
    """Retry or cancel the jobs ticked in the list; each one as its own button would."""
    who, fields = await acting(request)
    action = first(fields, "action")
    if action not in bulk.ACTIONS:
        message = "action: must be retry or cancel"
        return render(request, "error.html", who, 422, live=False, message=message)
    done, refused = 0, []
    for raw in fields.get("id", [])[:PAGE_SIZE]:
        try:
            job = await act(request, f"/jobs/{int(raw) if raw.isdigit() else 0}/{action}")
            if action == "cancel":
                cancelled(job)
            done += 1
        except HTTPException as exc:  # skips that job only
            refused.append(f"job {raw}: {exc.detail}")
    verb = "retried" if action == "retry" else "cancelled or asked to stop"
    return render(
        request, "done.html", who, live=False, message=f"{done} jobs {verb}.",
        refused=refused, back=local(first(fields, "back"), ""),
    )  # fmt: skip


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
async def job_page(request: Request, job_id: int) -> HTMLResponse:
    who = await session.principal(request)
    jq = jobqueue(request)
    job = access.visible(await jq.get(job_id), who, job_id)
    attempts = access.shown_attempts(await jq.attempts(job_id), who)
    trace_url = jq.settings.trace_url
    payloads = who.has(Scope.PAYLOADS)
    workflow = None if job.workflow_id is None else await jq.get_workflow(job.workflow_id)
    return render(
        request,
        "job.html",
        who,
        job=job,
        workflow=workflow,
        **workflow_nodes(workflow, who),
        attempts=attempts,
        payloads=payloads,
        payload=json.dumps(job.payload, indent=2, sort_keys=True) if payloads else None,
        result=json.dumps(job.result, indent=2, sort_keys=True) if payloads else None,
        trace_link=None
        if trace_url is None or job.trace_id is None
        else trace_url.replace("{trace_id}", job.trace_id),
        may_retry=who.has(Scope.CONTROL) and job.status in RETRYABLE_STATES,
        may_cancel=who.has(Scope.CONTROL) and job.status not in FINAL_STATES,
        running=job.status == JobStatus.RUNNING,
    )


@router.get("/workflows/{workflow_id}", response_class=HTMLResponse)
async def workflow_page(request: Request, workflow_id: int) -> HTMLResponse:
    who = await session.principal(request)
    workflow = await jobqueue(request).get_workflow(workflow_id)
    if workflow is None:
        raise HTTPException(404, detail=f"workflow {workflow_id} not found")
    nodes = workflow_nodes(workflow, who)
    if not nodes["nodes"]:  # none within the token's reach: as if there were none
        raise HTTPException(404, detail=f"workflow {workflow_id} not found")
    return render(request, "workflow.html", who, workflow=workflow, **nodes)


def workflow_nodes(workflow: Workflow | None, who: Principal) -> dict[str, Any]:
    """The workflow's jobs ``who`` may see, and how many it may not."""
    if workflow is None:
        return {"nodes": [], "hidden": 0}
    nodes = [n for n in workflow.jobs if who.allows(queue=n.job.queue, type=n.job.type)]
    return {"nodes": nodes, "hidden": len(workflow.jobs) - len(nodes)}


@router.post("/jobs/{job_id}/retry")
async def retry(request: Request, job_id: int) -> Response:
    await acting(request)
    await act(request, f"/jobs/{job_id}/retry")
    return within(request, f"/jobs/{job_id}", "/jobs")


@router.post("/jobs/{job_id}/cancel")
async def cancel(request: Request, job_id: int) -> Response:
    await acting(request)
    cancelled(await act(request, f"/jobs/{job_id}/cancel"))
    return within(request, f"/jobs/{job_id}", "/jobs")


def cancelled(job: dict[str, Any]) -> None:
    """A cancel waits out a claim holding the job's row, but only for so long
    (control.LOCKED_WAIT_SECONDS): past that it changes nothing, so say so rather than
    report a cancel that did not happen."""
    if job["status"] != JobStatus.CANCELLED and job["cancel_requested_at"] is None:
        raise HTTPException(
            409,
            detail=f"job {job['id']} was held by another transaction; nothing changed: retry",
        )


# -- workers and cron ----------------------------------------------------------------------


@router.get("/workers", response_class=HTMLResponse)
async def workers(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    jq = jobqueue(request)
    store = await jq.store()
    leader = await store.leader_holder(role=LEADER_ROLE)
    running: dict[str, list[Job]] = {}
    for job in await store.workers_jobs(limit=RUNNING_SHOWN):
        if job.worker_id is not None and who.allows(queue=job.queue, type=job.type):
            running.setdefault(job.worker_id, []).append(job)
    # Stale: silent for longer than a lease. A live worker beats every third of one, so
    # it has missed three beats; the leases of the jobs it ran have run out, and the
    # rescuer gives them to other workers. (The rescuer forgets it after ten leases.)
    lease = jq.settings.lease_seconds
    now = datetime.now(UTC)
    workers = access.workers_shown(await jq.workers(), who)
    return render(
        request,
        "workers.html",
        who,
        workers=workers,
        leader=leader,
        running=running,
        stale={w.id for w in workers if (now - w.heartbeat_at).total_seconds() > lease},
        lease=lease,
        refresh=max(1.0, lease / 3),
    )


@router.get("/cron", response_class=HTMLResponse)
async def cron(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    jq = jobqueue(request)
    store = await jq.store()
    now = datetime.now(UTC)
    rows = []
    for schedule, (queue, _, _) in schedules(jq.settings, jq.tasks):
        if who.queues is not None and queue not in who.queues:
            continue
        last_tick = schedule.last_tick(now)
        last_job = await store.unique_holder(unique_key=schedule.key(last_tick))
        if last_job is not None and not who.allows(queue=last_job.queue, type=last_job.type):
            last_job = None
        rows.append(
            {
                "schedule": schedule,
                "queue": queue,
                "next": schedule.next_tick(now),
                "last_tick": last_tick,
                "last_job": last_job,
            }
        )
    return render(request, "cron.html", who, rows=rows)


@router.get("/audit", response_class=HTMLResponse)
async def audit_page(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    if not who.has(Scope.ADMIN):
        raise HTTPException(403, detail=f"the audit log needs the scope {Scope.ADMIN}")
    api = request.app.state.api
    after = request.query_params.get("after")
    page = None
    if api is not None:
        page = await audit.read(
            api,
            token=request.cookies.get(session.SESSION_COOKIE),
            client=session.client_of(request),
            after=int(after) if after and after.isdigit() else None,
        )
    return render(request, "audit.html", who, live=False, page=page)


# -- live ------------------------------------------------------------------------------------


@router.get("/events")
async def events(request: Request) -> StreamingResponse:
    await session.principal(request)
    stopping = request.app.state.stopping
    return StreamingResponse(
        hub(request).events(stopping),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
