"""The job page's traceback starts at the handler: the frames of jobqueue, and of the
standard library's thread pool it runs a sync handler in, are left out of its head.

The tracebacks here are Python's own, made by raising through code compiled under
the path of jobqueue's executor, as a real attempt's would be (the browser test of
the job page sees the real one)."""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

import jobqueue.worker.executor
from jobqueue.ui.tracebacks import handler_frames, runs_the_handler

EXECUTOR = jobqueue.worker.executor.__file__

# The shape of Executor._run/_invoke/_in_thread: the exception is caught in the
# outermost frame, so that its traceback starts there, as the real one does.
RUNNER = """
async def _run(handler):
    try:
        return await _invoke(handler)
    except Exception as exc:
        return "".join(traceback.format_exception(exc))

async def _invoke(handler):
    return await asyncio.get_running_loop().run_in_executor(None, handler, {})
"""


def through_the_executor(handler: Any) -> str:
    names: dict[str, Any] = {"asyncio": asyncio, "traceback": traceback}
    exec(compile(RUNNER, EXECUTOR, "exec"), names)
    text: str = asyncio.run(names["_run"](handler))
    return text


def send_mail(payload: dict[str, str]) -> None:
    try:
        payload["to"]
    except KeyError as exc:
        raise ConnectionError("mail server down") from exc


def test_the_runner_frames_are_left_out_of_each_traceback_and_the_handler_s_kept() -> None:
    full = through_the_executor(send_mail)
    assert f'File "{EXECUTOR}"' in full
    assert "concurrent/futures/thread.py" in full

    shown = handler_frames(full)
    assert shown is not None
    assert EXECUTOR not in shown
    assert "concurrent/futures" not in shown
    assert "  [3 frames that ran the handler left out: see the full traceback]" in shown
    # The cause, raised and caught in the handler, is whole; the error it became starts
    # at the handler's line that raised it.
    assert 'payload["to"]' in shown
    assert "KeyError: 'to'" in shown
    second = shown.split("direct cause of the following exception:")[1]
    assert second.splitlines()[4].endswith("in send_mail")
    assert second.rstrip().endswith("ConnectionError: mail server down")


def test_a_traceback_with_no_frame_of_jobqueue_is_shown_as_it_is() -> None:
    try:
        send_mail({})
    except ConnectionError as exc:
        text = "".join(traceback.format_exception(exc))
    assert handler_frames(text) is None


def test_an_error_of_jobqueue_itself_is_shown_whole() -> None:
    text = (
        "Traceback (most recent call last):\n"
        f'  File "{EXECUTOR}", line 180, in _run\n'
        "    result = await self._invoke(job)\n"
        "RuntimeError: a bug of jobqueue's\n"
    )
    assert handler_frames(text) is None


def test_frames_are_recognised_wherever_jobqueue_is_installed() -> None:
    assert runs_the_handler("/srv/app/.venv/lib/python3.12/site-packages/jobqueue/db/pool.py")
    assert runs_the_handler("C:\\venv\\Lib\\site-packages\\jobqueue\\worker\\executor.py")
    assert runs_the_handler("/usr/lib/python3.13/asyncio/tasks.py")
    assert not runs_the_handler("/srv/app/myapp/jobqueue/handlers.py")  # not one of ours
    assert not runs_the_handler("/srv/app/jobqueue/app.py")  # an application's own folder
    assert not runs_the_handler("/srv/app/myapp/tasks.py")
