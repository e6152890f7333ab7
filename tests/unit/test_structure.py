"""The structure the code keeps as it grows: no import cycle inside jobqueue, between
modules or packages; leaves that import nothing of it, and a database layer that
imports only them; the store opened only by the facade; every query run through the
store, and one store method per .sql file. Read from the source with ast: nothing
is imported or run."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from jobqueue.db.sql import QUERY_NAMES

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "jobqueue"

# The methods of asyncpg's (and psycopg's, and SQLAlchemy's) connections that send SQL.
RUNS_SQL = {
    "fetch",
    "fetchrow",
    "fetchval",
    "execute",
    "executemany",
    "cursor",
    "copy_records_to_table",
    "copy_to_table",
    "copy_from_query",
    "exec_driver_sql",
}
# The store's parts: the Store (db/store.py) inherits the classes of the others, one
# file a concern.
STORE_PARTS = {
    "db/store.py": "Store",
    "db/process_queries.py": "ProcessQueries",
    "db/workflow_queries.py": "WorkflowQueries",
    "db/queue_queries.py": "QueueQueries",
    "db/admin_queries.py": "AdminQueries",
    "db/schedule_queries.py": "ScheduleQueries",
    "db/search_queries.py": "SearchQueries",
    "db/step_queries.py": "StepQueries",
    "db/wait_queries.py": "WaitQueries",
}
# The store itself, and the adapters that make an application's connection one it
# can run on.
STORE_FILES = {*STORE_PARTS, "db/query_base.py", "db/connections.py"}
# What may send SQL besides them, and why.
ALLOWED = {
    # A migration is a script of statements, applied as a whole; not a query.
    ("db/migrate.py", "conn.execute(migration.sql)"),
    # A migration outside a transaction, statement by statement, after the drops of
    # invalid indexes that the store's query writes (an identifier is no parameter).
    ("db/migrate.py", "conn.execute(statement)"),
}
SQL_TEXT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP)\s")
# Where SQL text may be written besides .sql files, and why: it is printed, never run.
PRINTS_SQL = {
    "db/grants.py",  # `jobqueue grants`: statements for psql, run by the owner
    "db/schema_dump.py",  # finds where pg_dump's schema begins in its output
}


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The jobqueue modules that importing ``name`` runs (at any level of the file:
    deferred and TYPE_CHECKING imports count too), parent packages included unless
    they are ``name``'s own, which Python has already begun to import."""
    is_package = path.name == "__init__.py"
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
    if not is_package:
        own.discard(name)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}"
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                module = ".".join(parts[:i])
                if module in known and module not in own:
                    found.add(module)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_inside_jobqueue() -> None:
    paths = dict(modules())
    known = set(paths)
    graph = {name: imported(name, path, known) for name, path in paths.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_two_packages_import_each_other() -> None:
    """With each package taken as one node (``jobqueue.db``, ``jobqueue.model``...) and
    each root module as its own, the graph has no cycle: so no package imports one that
    imports it back (``db`` and ``limits`` once did, through ``limits.claims``), and
    nothing ``db`` imports is above it."""
    paths = dict(modules())
    known = set(paths)
    graph = {name: imported(name, path, known) for name, path in paths.items()}
    packages = {name for name, path in paths.items() if path.name == "__init__.py"}
    assert cycles(by_package(graph, packages - {"jobqueue"})) == []


def by_package(graph: dict[str, set[str]], packages: set[str]) -> dict[str, set[str]]:
    """``graph`` with each package's modules made one node, named after the package;
    the root package (``jobqueue``, which re-exports) left out."""

    def node(module: str) -> str:
        return next((p for p in packages if module == p or module.startswith(f"{p}.")), module)

    merged: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if "." not in module:
            continue
        merged.setdefault(node(module), set()).update(
            node(t) for t in targets if "." in t and node(t) != node(module)
        )
    return merged


def test_the_package_graph_sees_two_packages_tied() -> None:
    graph = {"j.p.a": {"j.q.b"}, "j.q.c": {"j.p.d"}, "j.p.d": set(), "j.q.b": set()}
    assert cycles(by_package(graph, {"j.p", "j.q"})) == [["j.p", "j.q"]]


# The leaves: what imports nothing of jobqueue's, so that any layer may import it (as
# River keeps rivertype): the records every layer shares, and the loggers.
LEAVES = ("jobqueue.model", "jobqueue.logs")


def graph_of(prefix: str) -> dict[str, set[str]]:
    """What each module of ``prefix`` (a package, or a module) imports of jobqueue."""
    paths = dict(modules())
    known = set(paths)
    return {
        name: imported(name, path, known)
        for name, path in paths.items()
        if name == prefix or name.startswith(f"{prefix}.")
    }


def within(module: str, *places: str) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in places)


def test_the_leaves_import_nothing_of_jobqueue() -> None:
    for leaf in LEAVES:
        reached = {t for targets in graph_of(leaf).values() for t in targets}
        assert {t for t in reached if not within(t, leaf)} == set(), leaf


def test_the_database_layer_imports_only_the_leaves() -> None:
    """``jobqueue.db`` returns records and takes values: it is given what it needs
    (settings, clocks), never imports the layers that use it."""
    offenders = {
        f"{module} imports {target}"
        for module, targets in graph_of("jobqueue.db").items()
        for target in targets
        if not within(target, "jobqueue.db", *LEAVES)
    }
    assert offenders == set()


def test_the_dashboard_uses_the_api_only_as_a_client() -> None:
    """The dashboard acts through the HTTP API's routes, in process
    (jobqueue.ui.inprocess): the application, made by ``jobqueue.api.asgi``, is all it
    takes of the API. What both need of tokens and sessions is in ``jobqueue.auth``."""
    reached = {t for targets in graph_of("jobqueue.ui").values() for t in targets}
    assert {t for t in reached if within(t, "jobqueue.api")} <= {
        "jobqueue.api",
        "jobqueue.api.asgi",
    }
    reached = {t for targets in graph_of("jobqueue.auth").values() for t in targets}
    assert {t for t in reached if within(t, "jobqueue.api", "jobqueue.ui")} == set()


# Where a JobQueue's store is opened: the facade (app.py, and its connection half in
# database.py), and the services it serves: ``jq.inspect`` (what is read besides jobs
# and queues) and ``jq.http_workers`` (workers over HTTP). The dashboard, the API, the
# CLI, the server and the test helpers go through them; a component wired once (the
# API's authenticator) is given the facade's ``store`` to call.
OPENS_THE_STORE = {"app.py", "database.py", "inspection.py", "http_workers/service.py"}


def test_nothing_above_the_facade_opens_the_store() -> None:
    offenders = [
        f"{rel(path)}:{node.lineno}: {ast.unparse(node)}"
        for _, path in modules()
        if rel(path) not in OPENS_THE_STORE
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "store"
        and not node.args
    ]
    assert offenders == []


def test_no_query_runs_outside_the_store() -> None:
    offenders = []
    for _, path in modules():
        if rel(path) in STORE_FILES:
            continue
        source = path.read_text()
        tree = ast.parse(source)
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            where = f"{rel(path)}:{getattr(node, 'lineno', 0)}"
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in RUNS_SQL
                and (rel(path), ast.get_source_segment(source, node)) not in ALLOWED
            ):
                offenders.append(f"{where}: {ast.get_source_segment(source, node)}")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and rel(path) not in PRINTS_SQL
                and SQL_TEXT.match(node.value)
            ):
                offenders.append(f"{where}: SQL text {node.value[:40]!r}")
            elif isinstance(node, ast.ImportFrom) and node.module == "jobqueue.db.sql":
                names = {alias.name for alias in node.names}
                if names & {"queries", "Queries", "QUERY_NAMES"} and rel(path) != "db/sql.py":
                    offenders.append(f"{where}: imports the raw queries")
    assert offenders == [], "queries run outside jobqueue.db.store:\n" + "\n".join(offenders)


def store_methods() -> dict[str, set[str]]:
    """Each method of Store and of its parts, with the queries (``self._q.<name>``) it
    runs."""
    methods: dict[str, set[str]] = {}
    for file, name in STORE_PARTS.items():
        tree = ast.parse((PACKAGE / file).read_text())
        part = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        methods.update(part_methods(part))
    return methods


def part_methods(part: ast.ClassDef) -> dict[str, set[str]]:
    methods: dict[str, set[str]] = {}
    for item in part.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            methods[item.name] = {
                node.attr
                for node in ast.walk(item)
                if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "_q"
                and node.attr in QUERY_NAMES
            }
    return methods


def test_every_sql_file_has_exactly_one_store_method() -> None:
    # QUERY_NAMES are the .sql files (tests/unit/test_sql.py checks that).
    runners: dict[str, list[str]] = {name: [] for name in QUERY_NAMES}
    for method, ran in store_methods().items():
        assert len(ran) <= 1, f"Store.{method} runs several queries: {sorted(ran)}"
        for query in ran:
            runners[query].append(method)
    assert {q: m for q, m in runners.items() if len(m) != 1} == {}


# A file longer than this holds more than one concern: split it by what it holds.
MAX_LINES = 600


def test_no_source_file_is_over_600_lines() -> None:
    long = {
        rel(path): n
        for _, path in modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
