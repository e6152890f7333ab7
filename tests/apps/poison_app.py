"""Handlers that misbehave in every way a worker must survive, and one that behaves."""

import asyncio
import os
from typing import Any

from jobqueue import JobQueue

jq = JobQueue()


@jq.task("exit")
def exit_process(payload: dict[str, Any]) -> None:
    os._exit(3)  # takes the whole worker process down, mid-job


@jq.task("hang", timeout=0.5)
async def hang(payload: dict[str, Any]) -> None:
    await asyncio.sleep(3600)


@jq.task("boom")
def boom(payload: dict[str, Any]) -> None:
    raise ValueError("poison")


@jq.task("ok")
async def ok(payload: dict[str, Any]) -> None:
    await asyncio.sleep(0.01)


@jq.task("spin", timeout=0.5, isolated=True)
def spin(payload: dict[str, Any]) -> None:
    while True:  # a sync handler stuck for good: only killing its process stops it
        pass


@jq.task("isolated_ok", isolated=True)
def isolated_ok(payload: dict[str, Any]) -> None:
    if payload.get("fail"):
        raise KeyError(payload["fail"])


@jq.task("isolated_spin", isolated=True)
def isolated_spin(payload: dict[str, Any]) -> None:
    """Spins until killed: only a cancel (or shutdown) ends it. Creates the file
    payload["started"] names first, if any: a test can tell that the child runs."""
    if "started" in payload:
        open(payload["started"], "x").close()
    while True:
        pass
