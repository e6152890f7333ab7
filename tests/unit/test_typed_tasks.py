"""mypy checks ``task.enqueue`` against the task's payload type, with jobqueue's plugin
for the keyword form."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

MYPY_APP = """
from dataclasses import dataclass
from typing import TypedDict
from pydantic import BaseModel
from jobqueue import JobContext, JobQueue

class Email(BaseModel):
    to: str

@dataclass
class Invoice:
    number: int

class Resize(TypedDict):
    path: str
    width: int

jq = JobQueue()

@jq.task("send_email")
async def send_email(email: Email, ctx: JobContext) -> None: ...

@jq.task("invoice")
def invoice(payload: Invoice) -> None: ...

@jq.task("resize")
def resize(payload: Resize) -> None: ...

async def main() -> None:
    send_email.enqueue(Email(to="a@b.c"), delay_seconds=5)
    await send_email.enqueue_async(Email(to="a@b.c"))
    resize.enqueue({"path": "a.png", "width": 3})
    send_email.enqueue(to="a@b.c", queue="mail")
    await invoice.enqueue_async(number=7)
    resize.enqueue(path="a.png", width=3)
    send_email.enqueue({"to": "a@b.c"})  # line 36: not an Email
    resize.enqueue({"path": "a.png", "width": "wide"})  # line 37
    send_email.enqueue(Email(to="a@b.c"), delay=5)  # line 38: no such option, nor field
    send_email.enqueue(to=3)  # line 39: the field's type
    invoice.enqueue(numbr=7)  # line 40: no such field
    resize.enqueue(path="a.png", width="wide")  # line 41
    send_email.enqueue(to="a@b.c", priority="high")  # line 42: the option's type
    jq.tasks["resize"].enqueue({"path": "a.png"}, queue=7)  # line 43: a dict payload's
"""


@pytest.mark.parametrize(
    ("plugins", "errors"),
    [
        # mypy alone checks the payload objects; the keyword form needs the plugin.
        ("", [36, 37]),
        ("pydantic.mypy, jobqueue.mypy", [36, 37, 38, 39, 40, 41, 42, 43]),
    ],
)
def test_mypy_checks_task_enqueue(tmp_path: Path, plugins: str, errors: list[int]) -> None:
    (tmp_path / "app.py").write_text(MYPY_APP)
    (tmp_path / "mypy.ini").write_text(
        f"[mypy]\nstrict = True\nplugins = {plugins}\n[pydantic-mypy]\ninit_typed = True\n"
    )
    # A cache per set of plugins: shared, each run would invalidate the other's, and
    # checking pydantic afresh takes mypy some 15 s where a warm cache takes one.
    cache = ROOT / ".mypy_cache" / ("tests-plugins" if plugins else "tests-plain")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
         "--cache-dir", str(cache), "--no-error-summary", str(tmp_path / "app.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    lines = sorted(
        {int(line.split(":")[1]) for line in result.stdout.splitlines() if ": error:" in line}
    )
    assert lines == errors, result.stdout
