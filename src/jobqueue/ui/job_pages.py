"""The jobs' pages: the list (filtered, keyset-paged), "all that match" and the ticked
jobs' actions, one job's page and its workflow's, and one job's actions (retry,
cancel).

The list filters by state, queue, type and creation time, within the token's reach
(jobqueue.auth.access); the job's page is a 404 for a job out of it, as for one that
does not exist. Every action is done by the HTTP API's route (jobqueue.ui.actions).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse

from jobqueue.auth import access, session
from jobqueue.model import search
from jobqueue.model.job import (
    FINAL_STATES,
    RETRYABLE_STATES,
    JobStatus,
)
from jobqueue.model.tokens import Principal, Scope
from jobqueue.ui import bulk
from jobqueue.ui.actions import act, acting, first
from jobqueue.ui.rendering import jobqueue, local, render, within
from jobqueue.workflows.model import Workflow

# The routes' order matters: /jobs/bulk must come before /jobs/{job_id}, which would
# take "bulk" as a job id (and answer 422), since FastAPI tries them as registered.
router = APIRouter()
PAGE_SIZE = 50
# The State filter's views of pending jobs by when they run (jobs_search.sql).
DUE_VIEWS = {
    "due": "pending, due now",
    "scheduled": "pending, scheduled for later",
    "retrying": "pending, waiting to retry",
}


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
        "q": q.get("q") or None,
        "terms": _terms(q.get("q")),
    }


def _terms(raw: str | None) -> search.Terms | None:
    if not raw:
        return None
    try:
        return search.parse_terms(raw)
    except ValueError as exc:
        raise BadFilter("search", str(exc).removeprefix("search: ")) from None


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
    terms: search.Terms | None = f["terms"]
    if terms is not None and terms.payload is not None and not who.has(Scope.PAYLOADS):
        message = "search: payload terms need the payloads scope"
        return render(request, "error.html", who, 403, live=False, message=message)
    page = search.JobPage([], None)
    scope = access.reach(who, queue=f["queue"], type=f["type"])
    if scope is not None:
        where = search.JobFilter(
            f["status"], scope[1], scope[0],
            terms.tags if terms else None, terms.meta if terms else None,
            terms.payload if terms else None, f["since"], f["until"], f["due"],
        )  # fmt: skip
        page = await jq.inspect.jobs(where, after=f["after"], limit=PAGE_SIZE)
    found = page.jobs
    base = {"status": f["due"] or f["status"], "queue": f["queue"], "type": f["type"],
            "q": f["q"]}  # fmt: skip
    raw = request.query_params
    timed = {"since": raw.get("since"), "until": raw.get("until")}
    may_control = who.has(Scope.CONTROL)
    bulk_links = {}
    # A bulk action filters by state, queue and type only: not by time, nor by when
    # a pending job is due.
    if may_control and f["since"] is None and f["until"] is None and f["due"] is None \
            and f["q"] is None:  # fmt: skip
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
        next_query=_query(after=page.next_after, **base, **timed) if page.next_after else None,
        truncated=page.truncated,
        scan_limit=search.PAYLOAD_SCAN_ROWS,
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
    if action not in (*bulk.ACTIONS, "delete"):
        message = "action: must be retry, cancel or delete"
        return render(request, "error.html", who, 422, live=False, message=message)
    done, refused = 0, []
    for raw in fields.get("id", [])[:PAGE_SIZE]:
        path = f"/jobs/{int(raw) if raw.isdigit() else 0}"
        try:
            if action == "delete":
                await act(request, path, method="DELETE")
            else:
                job = await act(request, f"{path}/{action}")
                if action == "cancel":
                    cancelled(job)
            done += 1
        except HTTPException as exc:  # skips that job only
            refused.append(f"job {raw}: {exc.detail}")
    verb = {"retry": "retried", "cancel": "cancelled or asked to stop", "delete": "deleted"}[action]
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
    detail = await jq.detail(job)  # a durable handler's steps, wait, children
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
        steps=detail.steps,
        detail=detail,
        payloads=payloads,
        payload=json.dumps(job.payload, indent=2, sort_keys=True) if payloads else None,
        result=json.dumps(job.result, indent=2, sort_keys=True) if payloads else None,
        trace_link=None
        if trace_url is None or job.trace_id is None
        else trace_url.replace("{trace_id}", job.trace_id),
        may_retry=who.has(Scope.CONTROL) and job.status in RETRYABLE_STATES,
        may_cancel=who.has(Scope.CONTROL) and job.status not in FINAL_STATES,
        may_run_now=who.has(Scope.CONTROL)
        and job.status == JobStatus.PENDING
        and job.run_at > datetime.now(UTC),
        may_delete=who.has(Scope.CONTROL)
        and job.status != JobStatus.RUNNING
        and job.workflow_id is None,
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


@router.post("/jobs/{job_id}/run-now")
async def run_now(request: Request, job_id: int) -> Response:
    await acting(request)
    await act(request, f"/jobs/{job_id}/run-now")
    return within(request, f"/jobs/{job_id}", "/jobs")


@router.post("/jobs/{job_id}/delete")
async def delete(request: Request, job_id: int) -> Response:
    await acting(request)
    await act(request, f"/jobs/{job_id}", method="DELETE")
    return within(request, "/jobs", "/jobs")


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
