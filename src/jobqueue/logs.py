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
        else structlog.dev.ConsoleRenderer(colors=False)
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
