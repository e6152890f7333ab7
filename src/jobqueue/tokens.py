"""API tokens: what each may do (scopes), where (queues, types), and until when.

A token is ``jqt_<key id>_<secret>``. The key id names the stored row without being
secret; the secret (256 random bits) is stored only as its SHA-256, which is enough for
a secret of that entropy, and is compared in constant time. See docs/security.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class Scope(StrEnum):
    ENQUEUE = "jobs:enqueue"
    READ = "jobs:read"
    PAYLOADS = "payloads:read"  # without it, payloads, results and logs are redacted
    CONTROL = "jobs:control"  # retry and cancel
    QUEUES = "queues:control"  # pause and resume
    METRICS = "metrics:read"
    ADMIN = "admin"  # tokens and the audit log, and every other scope


ALL_SCOPES = frozenset(Scope)


@dataclass(frozen=True)
class Principal:
    """Who a request acts as. ``name`` is the token's name, or None while the API is open
    (on loopback with no token configured), when every scope is granted."""

    name: str | None
    scopes: frozenset[Scope]
    queues: frozenset[str] | None = None  # None: every queue
    types: frozenset[str] | None = None  # None: every type
    client: str | None = None  # the client's address, for the audit log

    def has(self, scope: Scope) -> bool:
        return scope in self.scopes or Scope.ADMIN in self.scopes

    def allows(self, *, queue: str, type: str) -> bool:
        """Whether a job of this queue and type is within the token's reach."""
        return (self.queues is None or queue in self.queues) and (
            self.types is None or type in self.types
        )

    @property
    def actor(self) -> str:
        """The name the audit log records: the token's, or ``anonymous`` while open."""
        return self.name or "anonymous"


OPEN = Principal(name=None, scopes=ALL_SCOPES)


@dataclass(frozen=True)
class TokenInfo:
    """A token as `tokens list` shows it: never its secret."""

    name: str
    scopes: tuple[str, ...]
    queues: tuple[str, ...] | None
    types: tuple[str, ...] | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
