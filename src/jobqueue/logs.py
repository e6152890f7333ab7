"""Log output. jobqueue's loggers (``get_logger``) take structlog's calls, events with
fields, and deliver them in one of two ways:

- **As a library** (an application's ``JobQueue``, ``jq.worker()``): through the
  standard ``logging`` module, under the logger names ``jobqueue.*``, each event one
  record whose message is ``event key=value ...``. The application's logging
  configuration decides what is printed and where; jobqueue adds no handler and never
  writes to stdout (with nothing configured, Python prints warnings and errors on
  stderr). ``JOBQUEUE_LOG_LEVEL`` drops the events below it first: those are neither
  logged nor kept with their job (``ctx.log``, docs/job-logs.md).
- **In its own process** (``jobqueue serve/worker/api`` call ``configure``): each event
  rendered and printed on stderr, in the console or JSON format, and the records of
  the other libraries rendered the same way.

The loggers ignore structlog's global configuration, which is the application's, and
so does ``configure`` for jobqueue's own loggers (it does set structlog's global
configuration, for the handlers that a ``jobqueue`` process runs).

asyncpg's pool reports a failed reconnection with a traceback; jobqueue's own pools
(``jobqueue.db.pool.Pool``) have it in one line instead (``OneLineReconnects``).
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
from collections.abc import Callable, MutableMapping
from typing import Any

import structlog

DEBUG, INFO, WARNING, ERROR, CRITICAL = (
    logging.DEBUG,
    logging.INFO,
    logging.WARNING,
    logging.ERROR,
    logging.CRITICAL,
)

# JOBQUEUE_LOG_LEVEL: events below it are dropped before anything is done with them.
_level = INFO
# Set by ``configure`` (a jobqueue process): its level and format, which stand over a
# JobQueue's settings, and which a child process it starts configures again.
configured: tuple[str, str] | None = None
# A jobqueue process's: its events rendered (the text to print), and printed on stderr.
# Unset (a library), each event is a stdlib record.
_render: Callable[[Any, str, MutableMapping[str, Any]], Any] | None = None
_printer: structlog.PrintLogger | None = None


def enabled(level: str) -> bool:
    """Whether events of ``level`` get past JOBQUEUE_LOG_LEVEL (info unless set)."""
    return logging.getLevelNamesMapping()[level.upper()] >= _level


def use_level(level: str) -> None:
    """JOBQUEUE_LOG_LEVEL as a JobQueue's settings have it, unless a jobqueue process
    configured its logging (``configure``), whose level stands."""
    global _level
    if configured is None:
        _level = logging.getLevelNamesMapping()[level.upper()]


# -- the loggers ---------------------------------------------------------------------


class Logger(structlog.BoundLoggerBase):
    """structlog's logging methods, with the level test first: an event below
    JOBQUEUE_LOG_LEVEL costs one comparison. ``bind`` returns another Logger."""

    def debug(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        if _level > DEBUG:
            return None
        return self._proxy_to_logger("debug", event % args if args else event, **kw)

    def info(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        if _level > INFO:
            return None
        return self._proxy_to_logger("info", event % args if args else event, **kw)

    def warning(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        if _level > WARNING:
            return None
        return self._proxy_to_logger("warning", event % args if args else event, **kw)

    warn = warning

    def error(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        if _level > ERROR:
            return None
        return self._proxy_to_logger("error", event % args if args else event, **kw)

    def exception(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        kw.setdefault("exc_info", True)
        return self.error(event, *args, **kw)

    def critical(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._proxy_to_logger("critical", event % args if args else event, **kw)

    fatal = critical
    err = error

    def _proxy_to_logger(self, method_name: str, event: Any = None, **event_kw: Any) -> Any:
        try:
            args, kw = self._process_event(method_name, event, event_kw)
        except structlog.DropEvent:
            return None
        printer = _printer
        if printer is not None:
            # Straight to stderr, as structlog's own printing logger: a stdlib record
            # per event would cost a worker more per job, and be rendered the same.
            return printer.msg(*args)
        return getattr(self._logger, method_name)(*args, **kw)

    msg = info

    def log(self, level: int, event: Any = None, *args: Any, **kw: Any) -> Any:
        name = _NAMES.get(level)
        return None if name is None else getattr(self, name)(event, *args, **kw)

    # The async methods of structlog's own loggers, for a handler that uses them: a
    # line costs microseconds, not worth a thread.
    async def adebug(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self.debug(event, *args, **kw)

    async def ainfo(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self.info(event, *args, **kw)

    async def awarning(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self.warning(event, *args, **kw)

    async def aerror(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self.error(event, *args, **kw)

    async def aexception(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self.exception(event, *args, **kw)

    async def acritical(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self.critical(event, *args, **kw)

    async def alog(self, level: int, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self.log(level, event, *args, **kw)


_NAMES = {DEBUG: "debug", INFO: "info", WARNING: "warning", ERROR: "error", CRITICAL: "critical"}
_LEVELS = {name: level for level, name in _NAMES.items()}


def get_logger(name: str, *processors: Any) -> Any:
    """jobqueue's logger ``name`` (``jobqueue.<part>``); ``processors`` run first
    (a job's log capture, see jobqueue.observability.joblogs)."""
    return Logger(logging.getLogger(name), [*processors, *_CHAIN], {})


def _deliver(logger: logging.Logger, method: str, event: MutableMapping[str, Any]) -> Any:
    """The last processor: the event rendered by a jobqueue process; else the message of
    a stdlib record, the event and its fields, and its exception for the formatter."""
    render = _render
    if render is not None:
        return render(logger, method, event)
    if not logger.isEnabledFor(_LEVELS[method]):
        raise structlog.DropEvent  # the application's logging would drop it: not rendered
    exc_info = event.pop("exc_info", None)
    text = str(event.pop("event", ""))
    if event:
        text += " " + " ".join(f"{k}={_value(v)}" for k, v in event.items())
    return (text,), {"exc_info": exc_info} if exc_info else {}


_CHAIN: list[Any] = [structlog.contextvars.merge_contextvars, _deliver]

# A field value shown as it is; any other is quoted.
_PLAIN = re.compile(r"[^\s='\"]+")


def _value(value: Any) -> str:
    text = str(value)
    return text if _PLAIN.fullmatch(text) else repr(text)


# -- a jobqueue process ----------------------------------------------------------------


def configure(level: str = "info", fmt: str = "console") -> None:
    """Logging for a process that jobqueue runs (the CLI): jobqueue's events, the
    handlers' structlog events and every stdlib record printed on stderr in ``fmt``
    (``console`` or ``json``), from ``level`` up."""
    global _level, configured, _render, _printer
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        # Python's own traceback format, not rich's (the default once rich is
        # installed): rich renders one traceback, with its frames' locals, in about a
        # second of CPU on the thread that logs it, the event loop's. A database
        # outage fails many attempts at once, each logged with its traceback: the
        # worker and the API froze for seconds, and a failover took that much longer.
        else structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    )
    # The console renderer prints tracebacks itself; JSON needs them as a string field.
    last: list[structlog.types.Processor] = [
        *([structlog.processors.format_exc_info] if fmt == "json" else []),
        renderer,
    ]
    numeric = _level = logging.getLevelNamesMapping()[level.upper()]
    configured = (level, fmt)
    # merge_contextvars is already in jobqueue's loggers' chain, before _deliver.
    own = [*shared[1:], *last]

    def render(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        rendered: Any = event
        for processor in own:
            rendered = processor(logger, method, rendered)
        return rendered

    _render, _printer = render, structlog.PrintLogger(sys.stderr)
    structlog.configure(
        processors=[*shared, *last],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # Request lines for every job enqueued drown the job lines; ask for debug to see them.
    logging.getLogger("uvicorn.access").setLevel(max(numeric, logging.WARNING))


# -- asyncpg's pool --------------------------------------------------------------------

# True in the task in which one of jobqueue's pools restores its minimum of connections.
reconnecting: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "jobqueue_reconnecting", default=False
)
RECONNECT_FAILED = "Failed to restore the pool connection floor"


class OneLineReconnects(logging.Filter):
    """A failed reconnection of one of jobqueue's pools as one line ending with its
    error, instead of a traceback. asyncpg's pool logs every failed attempt at
    reopening its minimum of connections with one: during an outage, once a second or
    so per pool, each a screenful of asyncpg's internals for what jobqueue's own loops
    report in a line each. Other records of asyncpg's logger (an application's pools')
    pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and reconnecting.get() and str(record.msg).startswith(RECONNECT_FAILED):
            exc = record.exc_info[1]
            text = (str(exc) or type(exc).__name__) if exc is not None else "unknown error"
            record.msg = f"{record.getMessage()}: {text}"
            record.args = None
            record.exc_info = record.exc_text = None
        return True


def quiet_reconnects() -> None:
    """Install ``OneLineReconnects`` on asyncpg's pool logger, once per process."""
    pool_log = logging.getLogger("asyncpg.pool")
    if not any(isinstance(f, OneLineReconnects) for f in pool_log.filters):
        pool_log.addFilter(OneLineReconnects())
