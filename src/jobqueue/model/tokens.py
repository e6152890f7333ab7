"""API tokens as records: what each may do (scopes), where (queues, types), and until
when; and the principal a request acts as. Making, hashing and checking a token
(``jqt_<key id>_<secret>``) is jobqueue.auth.tokens; see docs/security.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class Scope(StrEnum):
    ENQUEUE = "jobs:enqueue"
    READ = "jobs:read"
    PAYLOADS = "payloads:read"  # without it, payloads, results and logs are redacted
    CONTROL = "jobs:control"  # retry and cancel
    WORK = "jobs:work"  # claim jobs and write their outcomes: an HTTP worker's
    SIGNAL = "jobs:signal"  # send signals to durable jobs (docs/durable.md#signals)
    QUEUES = "queues:control"  # pause and resume
    SCHEDULES = "schedules:control"  # create, change, pause, trigger and delete schedules
    METRICS = "metrics:read"
    ADMIN = "admin"  # tokens and the audit log, and every other scope


ALL_SCOPES = frozenset(Scope)
PREFIX = "jqt_"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}")
# The bootstrap token's name, as the audit log records it.
ADMIN_TOKEN_NAME = "env:JOBQUEUE_ADMIN_TOKEN"
# A bootstrap secret shorter than this is refused: it could be guessed.
ADMIN_TOKEN_MIN_LENGTH = 32


class TokenError(ValueError):
    """A token cannot be made as asked; the message is one line."""


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
    def restricted(self) -> bool:
        return self.queues is not None or self.types is not None

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

    @classmethod
    def from_record(cls, record: Any) -> TokenInfo:
        return cls(
            name=record["name"],
            scopes=tuple(record["scopes"]),
            queues=None if record["queues"] is None else tuple(record["queues"]),
            types=None if record["types"] is None else tuple(record["types"]),
            created_at=record["created_at"],
            expires_at=record["expires_at"],
            revoked_at=record["revoked_at"],
        )

    def state(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


@dataclass(frozen=True)
class StoredToken:
    """A token as the database keeps it: the hash of its secret, not the secret."""

    key_id: str
    name: str
    secret_hash: bytes
    scopes: frozenset[Scope]
    queues: frozenset[str] | None
    types: frozenset[str] | None
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    created_at: datetime | None = None

    @classmethod
    def from_record(cls, record: Any) -> StoredToken:
        return cls(
            key_id=record["key_id"],
            name=record["name"],
            secret_hash=bytes(record["secret_hash"]),
            # A scope this version does not know (written by a newer one) grants nothing.
            scopes=frozenset(Scope(s) for s in record["scopes"] if s in Scope._value2member_map_),
            queues=None if record["queues"] is None else frozenset(record["queues"]),
            types=None if record["types"] is None else frozenset(record["types"]),
            expires_at=record["expires_at"],
            revoked_at=record["revoked_at"],
            created_at=record["created_at"],
        )

    def info(self) -> TokenInfo:
        assert self.created_at is not None
        return TokenInfo(
            name=self.name,
            scopes=tuple(sorted(self.scopes)),
            queues=None if self.queues is None else tuple(sorted(self.queues)),
            types=None if self.types is None else tuple(sorted(self.types)),
            created_at=self.created_at,
            expires_at=self.expires_at,
            revoked_at=self.revoked_at,
        )
