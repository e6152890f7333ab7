"""The Workers page: each worker process, which one leads, the jobs each is running,
and which are stale. It shows only what the token may see: workers and running jobs
out of its reach are left out."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from jobqueue.auth import access, session
from jobqueue.model.job import Job
from jobqueue.ui.rendering import jobqueue, render

router = APIRouter()
# The running jobs the Workers page lists, at most.
RUNNING_SHOWN = 1_000


@router.get("/workers", response_class=HTMLResponse)
async def workers(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    jq = jobqueue(request)
    leader = await jq.inspect.leader()
    running: dict[str, list[Job]] = {}
    for job in await jq.inspect.running_jobs(limit=RUNNING_SHOWN):
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
