"""API tokens: what each may do (scopes), where (queues, types), and until when.

A token is ``jqt_<key id>_<secret>``. The key id names the stored row without being
secret; the secret (256 random bits) is stored only as its SHA-256, which is enough for
a secret of that entropy (no one can search 2^256 secrets, so a slow hash would only
slow every request), and is compared in constant time. See docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from jobqueue import fields


class Scope(StrEnum):
    ENQUEUE = "jobs:enqueue"
    READ = "jobs:read"
    PAYLOADS = "payloads:read"  # without it, payloads, results and logs are redacted
    CONTROL = "jobs:control"  # retry and cancel
    QUEUES = "queues:control"  # pause and resume
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


def new_token(
    *,
    name: str,
    scopes: Iterable[str],
    queues: Iterable[str] | None = None,
    types: Iterable[str] | None = None,
) -> tuple[StoredToken, str]:
    """A token to store, and its secret, to show once."""
    if not NAME.fullmatch(name):
        raise TokenError(
            f"token name {name!r}: 1 to 100 letters, digits and . _ : @ -, "
            "starting with a letter or digit"
        )
    wanted = list(scopes)
    if not wanted:
        raise TokenError("a token needs at least one --scope")
    unknown = [s for s in wanted if s not in Scope._value2member_map_]
    if unknown:
        known = ", ".join(Scope)
        raise TokenError(f"unknown scope {unknown[0]!r}; the scopes are: {known}")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    stored = StoredToken(
        key_id=key_id,
        name=name,
        secret_hash=digest(secret),
        scopes=frozenset(Scope(s) for s in wanted),
        queues=_restriction("--queue", queues, fields.check_queue_name),
        types=_restriction("--type", types, fields.check_type),
    )
    return stored, f"{PREFIX}{key_id}_{secret}"


def _restriction(
    flag: str, values: Iterable[str] | None, check: Callable[[str], str]
) -> frozenset[str] | None:
    """The names a token is restricted to, each checked as a job's own queue or type is
    (a name no job can have would restrict the token to nothing)."""
    if values is None:
        return None
    chosen = list(values)
    if not chosen or "" in chosen:
        raise TokenError(f"{flag} needs a non-empty name")
    try:
        return frozenset(fields.storable(check(value)) for value in chosen)
    except ValueError as exc:
        raise TokenError(f"{flag}: {str(exc).removeprefix('type: ')}") from None


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def split(token: str) -> tuple[str, str] | None:
    """(key id, secret) of a token of ours, or None for anything else."""
    if not token.startswith(PREFIX):
        return None
    key_id, sep, secret = token[len(PREFIX) :].partition("_")
    if not sep or not key_id or not secret:
        return None
    return key_id, secret


def matches(secret: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(digest(secret), stored_hash)


def admin_secret(environ: Mapping[str, str] | None = None) -> str | None:
    """The bootstrap token of JOBQUEUE_ADMIN_TOKEN or JOBQUEUE_ADMIN_TOKEN_FILE (a file
    holding it, for container secrets), or None. Not a setting like the others: a flag
    would show it in the process list, and the settings are printed in `--help`."""
    environ = os.environ if environ is None else environ
    secret = environ.get("JOBQUEUE_ADMIN_TOKEN") or None
    path = environ.get("JOBQUEUE_ADMIN_TOKEN_FILE") or None
    if secret is not None and path is not None:
        raise TokenError("set JOBQUEUE_ADMIN_TOKEN or JOBQUEUE_ADMIN_TOKEN_FILE, not both")
    if path is not None:
        try:
            secret = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            message = f"JOBQUEUE_ADMIN_TOKEN_FILE: cannot read {path}: {exc.strerror}"
            raise TokenError(message) from exc
    if secret is not None and len(secret) < ADMIN_TOKEN_MIN_LENGTH:
        raise TokenError(
            f"JOBQUEUE_ADMIN_TOKEN must be at least {ADMIN_TOKEN_MIN_LENGTH} characters "
            "(e.g. the output of: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return secret
