"""Process-isolated execution: `@jq.task(..., isolated=True)` runs each attempt of a sync
handler in a child process, which a timeout or a shutdown can kill.

A thread cannot be stopped from outside, so a sync handler stuck in a loop or a C call
keeps its thread (and part of the GIL) however its attempt ends. A process can be
killed. The price: a fork per attempt (a few milliseconds; children come from a fork
server, not from this threaded process), and the handler must be a module-level
function whose arguments pickle. An exception raised in the child fails the attempt
with its type and message; a child that dies fails it with its exit code.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from jobqueue import logs
from jobqueue.results import encode

# Forking this process directly would copy its event loop and threads mid-flight.
_context = multiprocessing.get_context("forkserver")


class IsolatedFailure(Exception):
    """The handler raised, or its process died; the message says which."""


async def run_isolated(
    fn: Callable[..., Any], args: tuple[Any, ...], max_result_bytes: int
) -> str | None:
    """Run ``fn(*args)`` in a child process; return its result as JSON text (see
    jobqueue.results), or raise IsolatedFailure."""
    receive, send = _context.Pipe(duplex=False)
    child = _context.Process(
        target=_child, args=(fn, args, max_result_bytes, send, logs.configured), daemon=True
    )
    child.start()
    send.close()
    try:
        outcome = await _read(receive)
    except BaseException:
        child.kill()  # cancelled: timeout or shutdown
        raise
    finally:
        receive.close()
        await asyncio.get_running_loop().run_in_executor(None, child.join)
    if outcome is _DIED:
        raise IsolatedFailure(f"handler process exited with code {child.exitcode}")
    succeeded, value = outcome
    if not succeeded:
        raise IsolatedFailure(value)
    result: str | None = value
    return result


_DIED = object()


async def _read(receive: Connection) -> Any:
    """The child's one message, or _DIED if it closed the pipe by dying."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(receive.fileno(), ready)
    try:
        await readable
    finally:
        loop.remove_reader(receive.fileno())
    try:
        return receive.recv()
    except EOFError:
        return _DIED


def _child(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    max_result_bytes: int,
    send: Connection,
    logging: tuple[str, str] | None,
) -> None:
    if logging is not None:  # a jobqueue process's: its lines printed as its own are
        logs.configure(*logging)
    try:
        # Encoded here: the value itself may not pickle; its JSON always does.
        send.send((True, encode(fn(*args), max_result_bytes)))
    except BaseException as exc:
        # The error as text: exception objects do not always pickle.
        send.send((False, f"{type(exc).__name__}: {exc}"))
    finally:
        send.close()
