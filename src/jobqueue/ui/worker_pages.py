"""The pages of what runs the jobs: Workers (each worker process, which one leads, the
jobs each is running, and which are stale) and Cron (each periodic job this process
knows, its next run, and its last tick with the job that tick made).

Both show only what the token may see: workers, running jobs and cron jobs out of its
reach are left out, and so are the schedules of queues it is not given.
"""

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


@router.get("/cron", response_class=HTMLResponse)
async def cron(request: Request) -> HTMLResponse:
    who = await session.principal(request)
    jq = jobqueue(request)
    now = datetime.now(UTC)
    rows = []
    for schedule, queue in jq.inspect.schedules():
        if who.queues is not None and queue not in who.queues:
            continue
        last_tick = schedule.last_tick(now)
        last_job = await jq.inspect.last_job(schedule, now)
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
