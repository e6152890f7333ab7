"""Limits shared by every worker of a queue (docs/limits.md): how many of its jobs run
at once (``global_limit``), per concurrency key (``key_limit``), and how many start per
period (``rate_limit``, ``key_rate_limit``). They are stored on the queue's row and
enforced by the claim (db/queries/claim_limited.sql), so they hold across processes
and hosts; a queue without limits is claimed as before, with no lock."""

from jobqueue.limits.model import (
    LIMIT_FIELDS,
    LimitChanges,
    LimitsInfo,
    Rate,
    changes_from,
    parse_rate,
)

__all__ = [
    "LIMIT_FIELDS",
    "LimitChanges",
    "LimitsInfo",
    "Rate",
    "changes_from",
    "parse_rate",
]
