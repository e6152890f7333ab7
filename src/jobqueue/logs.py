"""Log output: structlog for our own events, the same renderer for library loggers."""

from __future__ import annotations

import logging
import sys

import structlog

_level = logging.INFO


def enabled(level: str) -> bool:
    """Whether events of ``level`` are printed (info unless configured otherwise)."""
    return logging.getLevelNamesMapping()[level.upper()] >= _level


def configure(level: str = "info", fmt: str = "console") -> None:
    global _level
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
    numeric = _level = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        # The console renderer prints tracebacks itself; JSON needs them as a string field.
        processors=[
            *shared,
            *([structlog.processors.format_exc_info] if fmt == "json" else []),
            renderer,
        ],
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
    pool_log = logging.getLogger("asyncpg.pool")
    if not any(isinstance(f, _WithoutTraceback) for f in pool_log.filters):
        pool_log.addFilter(_WithoutTraceback())


class _WithoutTraceback(logging.Filter):
    """A record's exception as its message's end instead of a traceback. For asyncpg's
    pool, which logs every failed attempt at reopening its minimum of connections with
    one: during an outage, once a second or so per process, each a screenful of
    asyncpg's internals for what jobqueue's own loops report in a line each."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            record.msg = f"{record.getMessage()}: {str(exc) or type(exc).__name__}"
            record.args = None
            record.exc_info = record.exc_text = None
        return True
