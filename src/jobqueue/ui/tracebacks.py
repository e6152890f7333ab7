"""A failed attempt's traceback as the job page shows it first: the handler's frames.

A stored traceback starts with the frames that ran the handler: jobqueue's executor
and the thread pool it runs a sync handler in, two to five of them before the first
line the user wrote. The page shows each traceback of the chain from its first frame
of other code, and keeps the stored text, whole, one click away.

The trim is done on the text as it is rendered, not when the error is caught: the
stored traceback (and GET /jobs/{id}/attempts) stays the whole one, attempts stored
before this existed are trimmed too, and a failing attempt costs no work more. The
text does not name a frame's module, so a frame is jobqueue's when its file is in
this package, or is one of the files of its subpackages found under another
"jobqueue/" folder (a worker installed elsewhere, on another host), and the standard
library's when it is a file of asyncio or concurrent.futures.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from importlib.resources.abc import Traversable

HEADER = "Traceback (most recent call last):"
FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line \d+, in ')
# What awaits or runs the handler for the executor, in the standard library.
RUNNER = re.compile(r"[/\\](asyncio|concurrent[/\\]futures)[/\\]\w+\.py$")


@functools.cache
def _package_dir() -> str:
    return str(resources.files("jobqueue")).replace("\\", "/").rstrip("/") + "/"


@functools.cache
def _package_files() -> frozenset[str]:
    """This package's Python files in its subpackages, by their path within it
    ("worker/executor.py"). Its top-level modules are left out: an application's
    own folder called jobqueue may well have an app.py or a config.py."""
    found: set[str] = set()

    def walk(folder: Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.endswith(".py"):
                found.add(prefix + entry.name)

    walk(resources.files("jobqueue"), "")
    return frozenset(name for name in found if "/" in name)


def runs_the_handler(path: str) -> bool:
    """Whether a frame in file ``path`` is jobqueue's own, or the standard library's
    that the executor runs a handler through."""
    path = path.replace("\\", "/")
    if RUNNER.search(path) or path.startswith(_package_dir()):
        return True
    _, found, rest = path.rpartition("/jobqueue/")
    return bool(found) and rest in _package_files()


def handler_frames(text: str) -> str | None:
    """``text`` with the leading frames of each traceback in it that ran the handler
    left out, a line saying how many in their place; None when none are left out (or
    when they are all there is: an error in jobqueue itself is shown whole)."""
    lines = text.splitlines()
    out: list[str] = []
    dropped_any = False
    i = 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i] != HEADER:
            i += 1
            continue
        i += 1
        # The frames at the head of this traceback that ran the handler.
        start, dropped = i, 0
        while i < len(lines) and (m := FRAME.match(lines[i])) and runs_the_handler(m["file"]):
            i += 1
            while i < len(lines) and lines[i].startswith(("    ", "  [Previous line")):
                i += 1  # its source line, markers, repetitions
            dropped += 1
        if dropped and i < len(lines) and FRAME.match(lines[i]):
            frames = "frame" if dropped == 1 else "frames"
            out.append(
                f"  [{dropped} {frames} that ran the handler left out: see the full traceback]"
            )
            dropped_any = True
        else:  # nothing of the handler's follows: keep them
            i = start
    return "\n".join(out) if dropped_any else None
