"""An application with a sync handler that sleeps, for shutdown tests."""

import time
from typing import Any

from jobqueue import JobQueue

jq = JobQueue()


@jq.task("sync_sleep")
def sync_sleep(payload: dict[str, Any]) -> None:
    time.sleep(float(payload["seconds"]))
