"""A plain script: enqueue jobs with the sync API, run them here, print how each ended.

    DATABASE_URL=postgresql://... python examples/script.py

(With no DATABASE_URL, jobqueue's embedded PostgreSQL in ./.jobqueue is used.) Here the
script runs its own jobs with ``jobqueue.testing.drain``; in production a worker runs
them instead: ``jobqueue worker --app examples.script:jq``.
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

from jobqueue import Job, JobQueue
from jobqueue.testing import drain

jq = JobQueue()  # DATABASE_URL and JOBQUEUE_SCHEMA from the environment


class Person(TypedDict):
    name: str


class Division(TypedDict):
    a: float
    b: float


@jq.task("greet")
def greet(person: Person) -> str:
    print(f"Hello, {person['name']}!", flush=True)
    return f"greeted {person['name']}"  # stored with the job as its result


@jq.task("divide", max_attempts=1)
def divide(division: Division) -> float:
    return division["a"] / division["b"]


async def run_jobs() -> list[Job]:
    try:
        return await drain(jq)  # every due job, run in this process
    finally:
        await jq.close()


def main() -> None:
    asyncio.run(jq.migrate())  # jobqueue's tables; a no-op once applied
    enqueued = [greet.enqueue({"name": name}) for name in ("Ada", "Grace")]
    enqueued.append(divide.enqueue({"a": 1, "b": 0}))
    print(f"Enqueued jobs {', '.join(str(job.id) for job in enqueued)}", flush=True)
    for job in asyncio.run(run_jobs()):
        outcome = job.last_error if job.last_error else repr(job.result)
        print(f"Job {job.id} {job.type} {job.payload}: {job.status}, {outcome}")


if __name__ == "__main__":
    main()
