"""Settings: read once from flags and environment variables, validated up front.

Every setting has an environment variable (the seed's names where it had one,
``JOBQUEUE_*`` for the rest) and a command-line flag; a flag wins over the
environment, which wins over the default. A bad value stops start-up with one
line that names the setting and the value.

Here is the catalogue (``Settings``: each setting with its variable, parser, default
and trade-off) and how it is loaded (``load``) and passed on to child processes
(``NONE_SPELLING``); how each value is read from text is jobqueue.settings_parsing.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobqueue.settings_parsing import (
    NO_DIRECT_SESSION,
    address_list,
    boolean,
    cron_entries,
    direct_url,
    dsn,
    duration,
    limit_entries,
    non_negative_seconds,
    one_of,
    optional_port,
    optional_seconds,
    optional_text,
    pool_size,
    port_number,
    positive_int,
    positive_seconds,
    queue_list,
    retention,
    schema_name,
    text,
    trace_url,
    tracing_mode,
)

# The error of load(), documented as jobqueue.config.ConfigError.
from jobqueue.settings_parsing import ConfigError as ConfigError

# How a parser spells "none", for passing a None setting on as a variable.
NONE_SPELLING: dict[Callable[[str, str], Any], str] = {
    retention: "forever",
    optional_seconds: "none",
    optional_text: "",
    dsn: "",
    direct_url: "",
    optional_port: "",
    pool_size: "auto",
    cron_entries: "",
    limit_entries: "",
    trace_url: "",
    address_list: "",
}


def setting(env: str, parse: Callable[[str, str], Any], default: Any, doc: str) -> Any:
    return field(default=default, metadata={"env": env, "parse": parse, "doc": doc})


@dataclass(frozen=True)
class Settings:
    """Everything a jobqueue process can be told. ``doc`` says the default's trade-off."""

    host: str = setting(
        "HOST",
        text,
        "127.0.0.1",
        "Address the HTTP API binds. The default keeps it off the network; "
        "use `0.0.0.0` to serve other hosts, which needs an API token (docs/security.md).",
    )
    port: int = setting(
        "PORT",
        port_number,
        5001,
        "HTTP port of `serve` and `api`.",
    )
    tls_cert: str | None = setting(
        "JOBQUEUE_TLS_CERT",
        optional_text,
        None,
        "PEM file of the certificate (and its chain) that `serve` and `api` present: "
        "with JOBQUEUE_TLS_KEY, the API speaks HTTPS only, for a server exposed without a "
        "TLS-terminating proxy. Unset: plain HTTP, for localhost or behind such a proxy. "
        "HTTPS costs a handshake per connection (keep-alive saves repeats); the files are "
        "read at start-up, so a renewed certificate needs a restart.",
    )
    tls_key: str | None = setting(
        "JOBQUEUE_TLS_KEY",
        optional_text,
        None,
        "PEM file of the private key of JOBQUEUE_TLS_CERT (unencrypted: there is no one "
        "to type a passphrase). Unset: plain HTTP. Keep it readable by this process only.",
    )
    database_url: str | None = setting(
        "DATABASE_URL",
        dsn,
        None,
        "PostgreSQL to use. Unset: an embedded PostgreSQL in JOBQUEUE_DATA_DIR, "
        "started and stopped with the process (for development and single hosts). "
        "It may list a primary and its standbys with `target_session_attrs=read-write` "
        "(`postgresql://db1,db2/jobs?target_session_attrs=read-write`): connections go "
        "to whichever accepts writes, so that a promoted standby is found by itself "
        "(docs/failover.md); a host that does not answer delays each new connection "
        "by up to the 5 s connect timeout, so list the likeliest primary first.",
    )
    direct_database_url: str | None = setting(
        "JOBQUEUE_DIRECT_DATABASE_URL",
        direct_url,
        None,
        "A session to the same database that no pooler stands in front of, for LISTEN "
        "(wake-ups within a millisecond) and migrations. Unset: DATABASE_URL. Set to "
        "another address, it says that DATABASE_URL goes through PgBouncer in "
        "transaction mode: pooled connections then prepare no named statements and "
        "set no session settings. `none`: the same, with no direct session at all "
        "(poll-only): workers find jobs by polling every POLL_INTERVAL_SECONDS, so a "
        "job waits up to that long to start, and every process polls (docs/scaling.md).",
    )
    pool_size: int | None = setting(
        "JOBQUEUE_POOL_SIZE",
        pool_size,
        None,
        "Server connections one process's pool may hold at once. Unset or `auto`: 1 "
        "in `jobqueue worker`, so that a host running `--processes N` holds N + 1 (its "
        "one LISTEN connection besides), and 16 in a process that serves HTTP or in an "
        "application's JobQueue, where concurrent requests each need one. A worker needs "
        "no more than 4 (claims, completions, heartbeats and maintenance, which otherwise "
        "wait for each other) and its handlers never use them: 4 drains tiny jobs 1.45 "
        "times as fast as 1 in one process (docs/scaling.md), for 3 more connections "
        "per process.",
    )
    gc_freeze: bool = setting(
        "JOBQUEUE_GC_FREEZE",
        boolean,
        True,
        "Once a worker has started, or the API serves, the process's objects are moved "
        "to the garbage collector's permanent generation (gc.freeze), which its full "
        "collections no longer walk: a drain of tiny jobs spends about 15% less of the "
        "worker's CPU, and its longest pause fell from tens of ms to about 2 "
        "(docs/benchmarks.md). The cyclic garbage left then is collected first (one "
        "full collection, once), but an object frozen then that later becomes cyclic "
        "garbage is never freed; turn it off for an application that holds a large "
        "object graph when its worker starts and drops it later.",
    )
    worker_count: int = setting(
        "WORKER_COUNT",
        positive_int,
        5,
        "Jobs run at once per process. Higher overlaps more I/O-bound jobs but holds "
        "more memory and, for sync handlers, more threads.",
    )
    max_attempts: int = setting(
        "MAX_ATTEMPTS",
        positive_int,
        3,
        "Attempts a job gets unless its task or the job itself says otherwise.",
    )
    max_snoozes: int = setting(
        "JOBQUEUE_MAX_SNOOZES",
        positive_int,
        100,
        "A job whose handler snoozed it this many times (`raise Snooze(seconds)`) fails "
        "at its next snooze, saying so, instead of waiting for ever for something that "
        "does not come. Higher lets a job wait out a longer outage in short snoozes; "
        "a snooze spends no attempt, so this is what bounds them.",
    )
    poll_interval: float = setting(
        "POLL_INTERVAL_SECONDS",
        positive_seconds,
        1.0,
        "Fallback poll when no NOTIFY arrives; also bounds how late a scheduled or "
        "retried job starts. Lower costs an idle query per interval per worker process.",
    )
    retry_delay: float = setting(
        "RETRY_DELAY_SECONDS",
        non_negative_seconds,
        10.0,
        "Wait before the first retry of a failed attempt; each later retry waits twice "
        "the one before (±10% jitter), up to JOBQUEUE_RETRY_MAX_DELAY, unless the task "
        "sets `retry=`. Shorter retries sooner but can hammer a struggling dependency.",
    )
    retry_max_delay: float = setting(
        "JOBQUEUE_RETRY_MAX_DELAY",
        non_negative_seconds,
        3600.0,
        "Longest wait between attempts under the default backoff. Lower keeps late "
        "attempts coming; higher gives a dependency that is down for hours more room.",
    )
    shutdown_timeout: float = setting(
        "JOBQUEUE_SHUTDOWN_TIMEOUT",
        non_negative_seconds,
        30.0,
        "Grace period for running jobs after SIGTERM; what is still running then is "
        "cancelled and handed back without counting the attempt. Keep it below your "
        "supervisor's kill timeout.",
    )
    job_timeout: float | None = setting(
        "JOBQUEUE_JOB_TIMEOUT",
        optional_seconds,
        None,
        "Longest an attempt may run unless its task sets `timeout=`; then an async handler "
        "is cancelled and the attempt fails (and is retried if attempts are left). Unset: "
        "no limit. A sync handler cannot be stopped inside its thread: its attempt fails "
        "at the timeout, but the thread runs on until the function returns.",
    )
    statement_timeout: float = setting(
        "JOBQUEUE_STATEMENT_TIMEOUT",
        positive_seconds,
        30.0,
        "Longest a query of the service may run (migrations excepted); then it is "
        "cancelled and retried like an outage, or answered 503. Its queries take "
        "milliseconds: lower notices a stuck server sooner, but a very large listing "
        "may need more.",
    )
    migration_lock_timeout: float = setting(
        "JOBQUEUE_MIGRATION_LOCK_TIMEOUT",
        positive_seconds,
        1.0,
        "Longest a migration's statement waits for a lock on a table before it gives up; "
        "the migration is then tried again after a pause, 30 times in all "
        "(docs/migrations.md). While an ALTER TABLE waits behind a long transaction, every "
        "enqueue and claim that comes after it waits too, so this bounds their wait. "
        "Higher lets a migration through a busier database in fewer tries, at the cost "
        "of longer stalls.",
    )
    lease_seconds: float = setting(
        "JOBQUEUE_LEASE_SECONDS",
        positive_seconds,
        30.0,
        "How long a claim holds without a heartbeat before the job counts as abandoned "
        "and is rescued. Workers renew it every third of this. Shorter rescues a dead "
        "worker's jobs sooner; too short, and a worker stalled for that long (a long GC "
        "pause, a stopped VM) loses its jobs to another worker.",
    )
    rescue_interval: float = setting(
        "JOBQUEUE_RESCUE_INTERVAL",
        positive_seconds,
        5.0,
        "How often the maintenance leader looks for expired leases. A job whose worker "
        "died is back in the queue within lease + this. Shorter costs one indexed query "
        "per interval.",
    )
    api_maintenance: bool = setting(
        "JOBQUEUE_API_MAINTENANCE",
        boolean,
        False,
        "`jobqueue api` also stands for maintenance leader: it rescues expired leases, ages "
        "priorities, enqueues cron ticks and applies retention, as a worker process does. "
        "For a deployment whose workers all work over HTTP (docs/http-workers.md), which "
        "has no `jobqueue worker` or `serve` to do it. Off: the API only serves requests, "
        "and needs no more than the api role's grants; on, it needs the worker role's "
        "(docs/database-roles.md).",
    )
    priority_aging: float | None = setting(
        "JOBQUEUE_PRIORITY_AGING",
        optional_seconds,
        300.0,
        "A due job that waited this long while better-priority jobs of its queue ran moves "
        "up one priority step, and again after each further such wait, so a job of priority "
        "p starts within about (p - best + 1) times this. Shorter lets low priorities catch "
        "up sooner; `none` turns aging off (strict priorities can starve).",
    )
    cron: str | None = setting(
        "JOBQUEUE_CRON",
        cron_entries,
        None,
        "Periodic jobs besides those declared on tasks: `type=cron expression[@time zone]`, "
        "separated by `;`, e.g. `report=0 9 * * 1-5@Europe/Paris;cleanup=*/10 * * * *`. "
        "The leader enqueues one job per tick.",
    )
    limits: str | None = setting(
        "JOBQUEUE_LIMITS",
        limit_entries,
        None,
        "Limits shared by every worker of a queue, written by each worker as it starts: "
        "`QUEUE:LIMIT=VALUE,...` separated by `;`, e.g. "
        "`mail:global_limit=5;api:rate_limit=100/m;tenants:key_limit=2` (docs/limits.md). "
        "Unset leaves the stored limits as they are (PATCH /queues/NAME, `jobqueue queues "
        "limit`); set, a worker's start overrides a limit changed at run time.",
    )
    retain_completed: float | None = setting(
        "JOBQUEUE_RETAIN_COMPLETED",
        retention,
        86400.0,
        "How long completed and cancelled jobs are kept (seconds, or `90m`, `24h`, `7d`; "
        "`forever` keeps them). The leader deletes older ones in small batches. Longer "
        "keeps more to look at, at the cost of a bigger table and its indexes.",
    )
    retain_failed: float | None = setting(
        "JOBQUEUE_RETAIN_FAILED",
        retention,
        7 * 86400.0,
        "How long failed jobs (dead letters) and their attempt history are kept; the same "
        "forms. Longer leaves more time to inspect and retry them.",
    )
    retain_audit: float | None = setting(
        "JOBQUEUE_RETAIN_AUDIT",
        retention,
        90 * 86400.0,
        "How long rows of the audit log (who retried, cancelled, paused, changed tokens) "
        "are kept; the same forms. Longer answers older questions, and the table grows by "
        "one row per control action; `forever` keeps every row.",
    )
    idempotency_ttl: float = setting(
        "JOBQUEUE_IDEMPOTENCY_TTL",
        duration,
        86400.0,
        "How long POST /jobs remembers an `Idempotency-Key` and the job it stored, whatever "
        "became of the job: a retry within it gets that job back, never a second one. "
        "Longer covers clients that retry later, at the cost of one small row per keyed "
        "request; keep it within JOBQUEUE_RETAIN_COMPLETED, or a late retry finds the "
        "job deleted (410).",
    )
    queues: tuple[str, ...] = setting(
        "JOBQUEUE_QUEUES",
        queue_list,
        ("default",),
        "Queues the workers of this process serve, comma-separated, besides the queues "
        "named by the loaded tasks; `mail=10` also caps that queue at 10 jobs at once "
        "(within WORKER_COUNT), so a slow queue cannot take every slot. `--queue mail=10` "
        "(repeatable) is the same as a flag.",
    )
    claim_any_type: bool = setting(
        "JOBQUEUE_CLAIM_ANY_TYPE",
        boolean,
        False,
        "Workers claim jobs of every type of their queues, and fail the attempts of those "
        "they have no handler for (`no handler for type ...`). Off: a worker claims only "
        "the types it has handlers for, and leaves the others pending for a worker that "
        "has them; a job no live worker handles waits, counted by GET /queues as "
        "`unhandled`. On, only for a fleet where every worker of a queue runs every type "
        "of it: a worker that lacks a type burns that type's attempts.",
    )
    app: str | None = setting(
        "JOBQUEUE_APP",
        optional_text,
        None,
        "`module:attribute` of the application's JobQueue whose tasks run here. "
        "Unset: the built-in demo tasks (`send_email`, `fail_test`, `sleep`, `noop`).",
    )
    schema: str = setting(
        "JOBQUEUE_SCHEMA",
        schema_name,
        "jobqueue",
        "PostgreSQL schema holding every table jobqueue creates, apart from the application's own.",
    )
    data_dir: str = setting(
        "JOBQUEUE_DATA_DIR",
        text,
        ".jobqueue",
        "Directory of the embedded PostgreSQL (used when DATABASE_URL is unset).",
    )
    max_payload_bytes: int = setting(
        "JOBQUEUE_MAX_PAYLOAD_BYTES",
        positive_int,
        1024 * 1024,
        "Largest JSON payload accepted. Big payloads slow every claim of the row; "
        "store large data elsewhere and pass a reference.",
    )
    max_result_bytes: int = setting(
        "JOBQUEUE_MAX_RESULT_BYTES",
        positive_int,
        64 * 1024,
        "Largest handler return value stored with its job, as JSON; a larger one fails "
        "the job (no retry: it would be as large again). Results live in the jobs table, "
        "read by every listing: return a reference to big data, not the data.",
    )
    progress_interval: float = setting(
        "JOBQUEUE_PROGRESS_INTERVAL",
        positive_seconds,
        1.0,
        "Least time between two progress writes of one running job; reports in between "
        "are merged, the latest kept. Shorter shows fresher progress for one UPDATE "
        "per job per interval. Also paces the writes of per-job logs.",
    )
    job_logs: str = setting(
        "JOBQUEUE_JOB_LOGS",
        one_of("ctx", "all", "off"),
        "ctx",
        "Per-job logs: `ctx` keeps what handlers write through `ctx.log` with their "
        "attempt; `all` also keeps the stdlib `logging` records emitted while a handler "
        "runs (a library's lines too, more to store); `off` keeps none. A handler that "
        "logs nothing costs nothing either way; one that logs costs one write per "
        "JOBQUEUE_PROGRESS_INTERVAL for all running jobs, plus one as its attempt ends.",
    )
    job_log_bytes: int = setting(
        "JOBQUEUE_JOB_LOG_BYTES",
        positive_int,
        64 * 1024,
        "Most bytes of log kept per attempt; the rest is dropped and a truncation marker "
        "line ends the log. Larger keeps more of a chatty handler's log, in a table row "
        "per attempt.",
    )
    max_request_bytes: int = setting(
        "JOBQUEUE_MAX_REQUEST_BYTES",
        positive_int,
        64 * 1024 * 1024,
        "Largest HTTP request body read (a `POST /jobs/batch` holds up to 10,000 jobs). "
        "Larger allows bigger batches but lets one request hold more memory.",
    )
    log_level: str = setting(
        "JOBQUEUE_LOG_LEVEL",
        one_of("debug", "info", "warning", "error"),
        "info",
        "Least severe log level logged; lower lines are dropped, neither printed nor kept "
        "with their job. In an application, its `logging` configuration then decides what "
        "is printed (docs/job-logs.md). `warning` skips the two lines per job, `debug` adds "
        "more.",
    )
    log_format: str = setting(
        "JOBQUEUE_LOG_FORMAT",
        one_of("console", "json"),
        "console",
        "`console` for people, `json` (one object per line) for log collectors.",
    )
    tracing: str = setting(
        "JOBQUEUE_TRACING",
        tracing_mode,
        "auto",
        "An OpenTelemetry span per job attempt (`pip install 'jobqueue[otel]'`). `auto`: "
        "when the process has a tracer provider set up as its worker starts; `on`: always, "
        "for one set up later; `off`: never, and OpenTelemetry is never imported. A span "
        "costs some microseconds per attempt, and its export what the exporter costs.",
    )
    trace_url: str | None = setting(
        "JOBQUEUE_TRACE_URL",
        trace_url,
        None,
        "Where the dashboard links a job's trace id: a URL in which `{trace_id}` is "
        "replaced, e.g. `https://tracing.example/trace/{trace_id}`. Unset: the trace id "
        "is shown as text, since there is no tracing UI to guess.",
    )
    metrics: str = setting(
        "JOBQUEUE_METRICS",
        one_of("on", "off"),
        "on",
        "Prometheus metrics: `GET /metrics` on the HTTP API, and on JOBQUEUE_METRICS_PORT "
        "if set. A process with neither counts nothing and loads no metrics code. `off` "
        "saves their cost (under 5% of throughput at tens of thousands of jobs a second).",
    )
    metrics_port: int | None = setting(
        "JOBQUEUE_METRICS_PORT",
        optional_port,
        None,
        "Port on HOST where a process serves `GET /metrics` on its own, for a "
        "`worker` that has no HTTP API; with `--processes N` it serves the sum of all N. "
        "Unset: no such port (`serve` and `api` have /metrics on their HTTP port).",
    )
    auth_max_failures: int = setting(
        "JOBQUEUE_AUTH_MAX_FAILURES",
        positive_int,
        20,
        "Failed authentications one client address may make in a minute before the "
        "HTTP API answers its every request with 429 until the minute has passed (per "
        "API process). Lower slows a scanner sooner; behind a proxy every client shares "
        "the proxy's address unless JOBQUEUE_TRUSTED_PROXIES lists it.",
    )
    trusted_proxies: tuple[str, ...] | None = setting(
        "JOBQUEUE_TRUSTED_PROXIES",
        address_list,
        None,
        "Addresses and networks (10.0.0.5,192.168.0.0/16) of the reverse proxies in front "
        "of `serve` and `api`. A request from one of them is taken as its X-Forwarded-Proto "
        "and X-Forwarded-For say: https makes the dashboard's cookies Secure, and the client "
        "address is the one the audit log records and JOBQUEUE_AUTH_MAX_FAILURES counts. "
        "Unset: those headers are ignored from every address, a proxy on the same host "
        "(127.0.0.1) included. List only proxies that set X-Forwarded-Proto and append to "
        "X-Forwarded-For: a listed address can claim any client and scheme. The standard "
        "Forwarded header is not read.",
    )
    migrate: bool = field(
        default=True,
        metadata={"doc": "Apply the schema at start-up (`--no-migrate` turns it off)."},
    )
    insecure_no_auth: bool = field(
        default=False,
        metadata={
            "doc": "Serve HTTP on an address other than loopback while no token exists "
            "(`--insecure-no-auth`), with a warning; without it such a start is refused. "
            "Only for a network you trust entirely, or behind a proxy that authenticates."
        },
    )

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve()

    @property
    def poll_only(self) -> bool:
        """No direct session (JOBQUEUE_DIRECT_DATABASE_URL=none): nothing LISTENs."""
        return self.direct_database_url == NO_DIRECT_SESSION

    @property
    def behind_pooler(self) -> bool:
        """Whether DATABASE_URL is a pooler in transaction mode: a direct session set
        apart from it, or none at all."""
        direct = self.direct_database_url
        return direct is not None and direct != self.database_url

    def direct_dsn(self, dsn: str) -> str | None:
        """Where LISTEN goes, given the resolved DATABASE_URL; None when poll-only."""
        if self.poll_only:
            return None
        return self.direct_database_url or dsn


@dataclass(frozen=True)
class Variable:
    """A variable read where it is used rather than into Settings: it has no flag."""

    env: str
    doc: str


# Secrets: no flag, since a flag would show the secret in the process list; never
# printed either (`jobqueue settings` says only whether each is set). Read by
# jobqueue.auth.tokens.admin_secret.
SECRET_VARIABLES = (
    Variable(
        "JOBQUEUE_ADMIN_TOKEN",
        "A bootstrap API token with every scope, for a deployment that cannot run "
        "`jobqueue tokens create` before its API starts (docs/security.md): at least 32 "
        "characters, audited as `env:JOBQUEUE_ADMIN_TOKEN`. Unset: only stored tokens. "
        "Whoever can read the process's environment holds it: create named tokens with "
        "it, then remove it.",
    ),
    Variable(
        "JOBQUEUE_ADMIN_TOKEN_FILE",
        "A file holding JOBQUEUE_ADMIN_TOKEN's secret instead (Docker and Kubernetes "
        "secrets), read at start-up; set one of the two, not both. Unset: none.",
    ),
)


def env_settings() -> list[dataclasses.Field[Any]]:
    """The settings that have an environment variable and a flag."""
    return [f for f in dataclasses.fields(Settings) if "env" in f.metadata]


def flag_name(f: dataclasses.Field[Any]) -> str:
    return "--" + f.name.replace("_", "-")


def load(
    environ: Mapping[str, str] | None = None, flags: Mapping[str, str | None] | None = None
) -> Settings:
    """Settings from ``flags`` (raw strings by field name), then ``environ``, then defaults."""
    environ = os.environ if environ is None else environ
    flags = flags or {}
    values: dict[str, Any] = {}
    for f in env_settings():
        env = f.metadata["env"]
        raw = flags.get(f.name)
        if raw is None:
            raw = environ.get(env)
        if raw is not None:
            values[f.name] = f.metadata["parse"](env, raw)
    if flags.get("migrate") == "false":
        values["migrate"] = False
    if flags.get("insecure_no_auth") == "true":
        values["insecure_no_auth"] = True
    return Settings(**values)
