"""One jobqueue process: the HTTP API, the workers, or both, with signal-driven shutdown.

Start-up: find the database (embedded unless DATABASE_URL), migrate unless told
not to, start the workers, then serve HTTP. SIGINT/SIGTERM: stop claiming, let
running jobs finish within JOBQUEUE_SHUTDOWN_TIMEOUT, hand back the rest, stop
HTTP, close the pool, exit 0. A second signal cuts the grace period short.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ipaddress
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg

from jobqueue import gc_tuning, observability, wakeups
from jobqueue.app import JobQueue
from jobqueue.db.migrate import code_version
from jobqueue.db.pool import is_unavailable, pooler_refusal
from jobqueue.logs import get_logger
from jobqueue.tls import tls_files
from jobqueue.worker import Worker

if TYPE_CHECKING:
    import asyncpg

    from jobqueue.api.http import HttpServer

log = get_logger("jobqueue.server")

HTTP_GRACE_SECONDS = 5.0


class StartupError(Exception):
    """Start-up cannot go on; the message is one line for the user."""


@dataclass(frozen=True)
class Roles:
    api: bool
    worker: bool


def event_loop(roles: Roles) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop a process of ``roles`` runs on (None: asyncio's own). The API alone
    runs on uvloop's, where it is installed: the same server costs 6 to 8% less CPU per
    POST /jobs on it (docs/benchmarks.md). A process with workers keeps asyncio's, the
    loop their figures and fault tests are measured on; a worker never imports uvloop."""
    if roles.worker:
        return None
    try:
        import uvloop
    except ImportError:  # not built for this platform
        return None
    return uvloop.new_event_loop


def load_jobqueue(spec: str | None) -> JobQueue:
    """The JobQueue named by ``module:attribute``, or the built-in demo tasks."""
    if not spec:
        from jobqueue import demo

        return demo.jq
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise StartupError(f"JOBQUEUE_APP must look like 'module:attribute', got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise StartupError(f"cannot import {module_name!r} for JOBQUEUE_APP: {exc}") from exc
    jq = getattr(module, attribute, None)
    if not isinstance(jq, JobQueue):
        raise StartupError(f"{spec!r} is not a jobqueue.JobQueue (got {type(jq).__name__})")
    return jq


def listen_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: a response written in two parts (headers,
    # body) must not wait ~40 ms for the client's delayed ACK (Nagle's algorithm).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock


async def serve(jq: JobQueue, roles: Roles) -> int:
    """Run until a signal; returns the exit code."""
    settings = jq.settings
    stop, force = asyncio.Event(), asyncio.Event()
    install_signal_handlers(stop, force)

    tls = tls_files(settings) if roles.api else None
    sock: socket.socket | None = None
    metrics = None
    try:
        auth = None
        if roles.api:
            # Decided before anything starts (no socket, migration, worker or LISTEN):
            # a start refused for want of a token leaves nothing to stop or log.
            auth = await http_auth(jq, stop)
            if auth is None:
                return 0  # stopped before the database could be reached
            sock = listen_socket(settings.host, settings.port)
        metrics = observability.start_metrics(settings, jq.tasks, http=roles.api)
        dsn = jq.direct_dsn  # the workers' LISTEN
        if not await wait_for_database(jq, stop, migrate=settings.migrate, checked=True):
            return 0  # stopped before the database could be reached
        pool = await jq.pool()
        worker = (
            Worker(pool, dsn, settings, jq.tasks, clock=jq.clock, relayed=wakeups.relayed_here())
            if roles.worker
            else None
        )
        if worker is not None:
            await worker.start()
        leader = api_leader(jq, pool) if roles.api and not roles.worker else None
        if metrics is not None:
            metrics.watch(pool, worker, jq.clock)
            if roles.api:
                metrics.watch_http_workers(jq.http_workers)
        http: HttpServer | None = None
        http_task = None
        if sock is not None:
            # Only here: a worker-only process never loads FastAPI and uvicorn.
            from jobqueue.api import create_app
            from jobqueue.api.http import HttpServer

            assert auth is not None
            open_without_tokens, admin = auth
            listener = worker.listener if worker is not None else None
            app = create_app(
                jq,
                check_types=roles.worker,
                listener_health=lambda: (
                    None
                    if listener is None
                    else "off; polling"
                    if settings.poll_only
                    else ("listening" if listener.healthy else "down; polling")
                ),
                metrics=metrics,
                open_without_tokens=open_without_tokens,
                admin_secret=admin,
            )
            from jobqueue import ui

            # The dashboard shares the API's view of the tokens and its shutdown signal.
            dashboard = ui.app(
                jq, authenticator=app.state.auth, stopping=app.state.stopping, api=app
            )
            app.mount("/ui", dashboard)
            http = HttpServer(
                app,
                grace_seconds=HTTP_GRACE_SECONDS,
                tls=tls,
                trusted_proxies=settings.trusted_proxies,
            )
            http_task = asyncio.create_task(http.serve(sockets=[sock]), name="http")
            gc_tuning.freeze_long_lived(settings)
            url = f"{'https' if tls else 'http'}://{settings.host}:{sock.getsockname()[1]}"
            log.info(f"Serving HTTP on {url} (the dashboard: {url}/ui)")
        await stop.wait()
        log.info("Shutdown requested: no new jobs will be claimed")
        if leader is not None:
            leader.cancel()
            await asyncio.gather(leader, return_exceptions=True)
        if worker is not None:
            await worker.stop(force)
        if http is not None and http_task is not None:
            app.state.stopping.set()
            jq.http_workers.stop()  # waiting claims answer now, not at the grace's end
            http.should_exit = True
            http.force_exit = force.is_set()
            await http_task
            await app.state.refusals.flush()  # the refusals counted since their rows
    finally:
        if metrics is not None:
            await metrics.stop()
        await jq.close()
        if sock is not None:
            sock.close()
    log.info("Stopped")
    return 0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


async def http_auth(jq: JobQueue, stop: asyncio.Event) -> tuple[bool, str | None] | None:
    """Whether the API may be open while no token exists, and the bootstrap token (None:
    stopped while waiting for the database). Secure by default: on an address other
    than loopback, a start with no token at all is refused unless --insecure-no-auth
    says otherwise. Whether a token exists is the one query run before the decision
    (with the embedded default, its server starts for it): nothing is migrated first."""
    from jobqueue.auth import tokens
    from jobqueue.model.tokens import TokenError

    settings = jq.settings
    try:
        admin = tokens.admin_secret()
    except TokenError as exc:
        raise StartupError(str(exc)) from exc
    if is_loopback(settings.host):
        return True, admin
    if settings.insecure_no_auth:
        log.warning(
            f"Serving HTTP on {settings.host} with no authentication until a token exists "
            "(--insecure-no-auth): anyone who can reach the port can enqueue and control jobs"
        )
        return True, admin
    if admin is None:
        if not await wait_for_database(jq, stop, migrate=False):
            return None
        if not await jq.tokens.any_active():
            raise StartupError(
                f"refusing to serve HTTP on {settings.host} without authentication: create "
                "a token (jobqueue tokens create --name NAME --scope SCOPE), set "
                "JOBQUEUE_ADMIN_TOKEN, or pass --insecure-no-auth"
            )
    return False, admin


async def wait_for_database(
    jq: JobQueue, stop: asyncio.Event, *, migrate: bool, checked: bool = False
) -> bool:
    """Connect (and migrate if ``migrate``, else check the schema if ``checked``),
    retrying while the database is unreachable: a process started during an outage
    waits for it instead of exiting. False if stopped first."""
    backoff = 0.5
    while not stop.is_set():
        try:
            await jq.pool()
            if migrate:
                await jq.migrate()
            elif checked:
                await check_schema(jq)
            return True
        except Exception as exc:
            refusal = pooler_refusal(exc)
            if refusal is not None:
                raise StartupError(refusal) from exc
            if not is_unavailable(exc):
                raise
            await jq.close_pool(terminate=True)
            log.warning(f"Database unavailable; retrying in {backoff:g}s", error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff)
            backoff = min(backoff * 2, 5.0)
    return False


async def check_schema(jq: JobQueue) -> None:
    """StartupError, in one line, when the database's schema is older than this code
    needs (a process started with migrations off, before `jobqueue migrate` ran). A
    newer schema is fine: a release's processes keep working beside the next one's
    migrations (docs/migrations.md). A role that may not read the migrations table
    (granted before it was in `jobqueue grants`) is not checked."""
    try:
        found = await jq.schema_status()
    except asyncpg.InsufficientPrivilegeError:
        return
    needed = code_version()
    if found.version < needed:
        raise StartupError(
            f"the database's schema {jq.settings.schema!r} is at migration {found.version} "
            f"and this jobqueue needs {needed}: run `jobqueue migrate`"
        )


def install_signal_handlers(stop: asyncio.Event, force: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("Second signal: stopping now; unfinished jobs are handed back")
            force.set()
        else:
            log.info(f"Received {signal.Signals(signum).name}")
            stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)


def api_leader(jq: JobQueue, pool: asyncpg.Pool) -> asyncio.Task[None] | None:
    """With JOBQUEUE_API_MAINTENANCE, this API process stands for maintenance leader
    beside the workers' (one leads at a time): for workers that all work over HTTP."""
    settings = jq.settings
    if not settings.api_maintenance:
        return None
    from jobqueue.db.store import Store
    from jobqueue.enqueue.rows import Rows
    from jobqueue.maintenance import Leader
    from jobqueue.schedules.runner import ScheduleRunner
    from jobqueue.task import schedules

    store = Store(pool, settings.schema, jq.clock)
    leader = Leader(
        store,
        f"api:{socket.gethostname()}:{os.getpid()}",
        lease_seconds=settings.lease_seconds,
        interval=settings.rescue_interval,
        retain_completed=settings.retain_completed,
        retain_failed=settings.retain_failed,
        retain_audit=settings.retain_audit,
        priority_aging=settings.priority_aging,
        schedules=ScheduleRunner(store, Rows(jq.tasks, settings), schedules(settings, jq.tasks)),
    )
    return asyncio.create_task(leader.run(), name="api leader")
