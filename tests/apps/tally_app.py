"""An application with a task set of its own (``tally``), sharing the `default` queue
with `jobqueue serve`'s demo tasks: for workers of two fleets on one queue."""

from typing import Any

from jobqueue import JobQueue

jq = JobQueue()


@jq.task("tally")
async def tally(payload: dict[str, Any]) -> dict[str, Any]:
    return {"counted": payload.get("n")}
