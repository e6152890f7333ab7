"""No test waits a fixed time for something to happen, or for it not to: a fixed sleep
is too short on a loaded machine and too long everywhere else. A test waits on a
service's test signal (jobqueue.checkpoints), on a job's end (``jq.wait``), on a
process's output, or polls what only the database or a process can tell, with a
deadline."""

from __future__ import annotations

import ast

from tests.conftest import APPS, ROOT, TESTS

SLEEPING_MODULES = {"time", "asyncio", "anyio"}


def fixed_sleeps(source: str) -> list[int]:
    """The lines of the fixed sleeps in ``source``: calls of ``time.sleep``,
    ``asyncio.sleep`` or ``anyio.sleep``, however imported, for a constant time. Allowed:
    a handler's simulated work (in a function declared or passed as a task's handler,
    or nested in one) and a poll (in the body of a ``while`` loop). Time that must
    pass is moved by the store's clock (``jq.clock``), not slept through."""
    tree = ast.parse(source)
    finder = SleepFinder(tree)
    finder.visit(tree)
    return [call.lineno for call in finder.found]


class SleepFinder(ast.NodeVisitor):
    def __init__(self, tree: ast.Module) -> None:
        self.modules: set[str] = set()  # names bound to a sleeping module
        self.functions: set[str] = set()  # names bound to its sleep
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self.modules |= {
                    a.asname or a.name for a in node.names if a.name in SLEEPING_MODULES
                }
            elif isinstance(node, ast.ImportFrom) and node.module in SLEEPING_MODULES:
                self.functions |= {a.asname or a.name for a in node.names if a.name == "sleep"}
        self.constants: set[str] = set()  # module-level names of fixed numbers
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if self.fixed(node.value):
                    self.constants |= {t.id for t in targets if isinstance(t, ast.Name)}
        # jq.task("x")(fn): fn is a handler as much as a decorated function is.
        self.passed_as_handlers = {
            node.args[0].id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and is_task_call(node.func)
            and node.args
            and isinstance(node.args[0], ast.Name)
        }
        self.in_handler = 0
        self.in_poll = False
        self.found: list[ast.Call] = []

    def fixed(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int | float)
        if isinstance(node, ast.Name):
            return node.id in self.constants
        if isinstance(node, ast.UnaryOp):
            return self.fixed(node.operand)
        if isinstance(node, ast.BinOp):
            return self.fixed(node.left) and self.fixed(node.right)
        return False  # computed when it runs: a payload's duration, say

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        handler = node.name in self.passed_as_handlers or any(
            is_task_call(d) or (isinstance(d, ast.Attribute) and d.attr == "task")
            for d in node.decorator_list
        )
        in_poll, self.in_poll = self.in_poll, False  # a function is not its caller's loop
        self.in_handler += handler
        self.generic_visit(node)
        self.in_handler -= handler
        self.in_poll = in_poll

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_While(self, node: ast.While) -> None:
        self.visit(node.test)
        in_poll, self.in_poll = self.in_poll, True
        for statement in node.body:
            self.visit(statement)
        self.in_poll = in_poll
        for statement in node.orelse:
            self.visit(statement)

    def visit_Call(self, node: ast.Call) -> None:
        if self.is_sleep(node.func) and not (self.in_handler or self.in_poll):
            seconds = node.args[0] if node.args else next((k.value for k in node.keywords), None)
            if seconds is None or self.fixed(seconds):
                self.found.append(node)
        self.generic_visit(node)

    def is_sleep(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Name):
            return func.id in self.functions
        return (
            isinstance(func, ast.Attribute)
            and func.attr == "sleep"
            and isinstance(func.value, ast.Name)
            and func.value.id in self.modules
        )


def is_task_call(node: ast.expr) -> bool:
    """``<anything>.task(...)``: a task's registration."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "task"
    )


def test_no_test_sleeps_a_fixed_time() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        if APPS not in path.parents  # the applications' handlers, all of them
        for line in fixed_sleeps(path.read_text())
    ]
    assert not offenders, (
        "fixed sleeps; wait on a test signal, jq.wait, a process's output, or poll with "
        "a deadline instead:\n  " + "\n  ".join(offenders)
    )


SAMPLE = """
import asyncio as aio
from time import sleep as nap

PAUSE = 0.5 * 2


@jq.task("work")
async def work(payload):
    await aio.sleep(0.3)
    def step():
        nap(1)


async def helper(payload, ctx):
    await aio.sleep(0.3)

jq.task("helper")(helper)


async def test_it(payload):
    while not done():
        await aio.sleep(0.02)
    await aio.sleep(payload["seconds"])
    await aio.sleep(2)  # fixed
    await aio.sleep(0.5)  # fixed
    nap(PAUSE)  # fixed
    await aio.sleep(delay=-1 + 1)  # fixed
    for _ in range(3):
        nap(1)  # fixed
    while True:
        def later():
            nap(1)  # fixed
"""


def test_the_check_tells_fixed_sleeps_from_allowed_ones() -> None:
    marked = [n for n, line in enumerate(SAMPLE.splitlines(), 1) if line.endswith("# fixed")]
    assert fixed_sleeps(SAMPLE) == marked
