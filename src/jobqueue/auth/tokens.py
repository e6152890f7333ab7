"""Making and checking API tokens (the records are jobqueue.model.tokens).

A token is ``jqt_<key id>_<secret>``. The key id names the stored row without being
secret; the secret (256 random bits) is stored only as its SHA-256, which is enough for
a secret of that entropy (no one can search 2^256 secrets, so a slow hash would only
slow every request), and is compared in constant time. See docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from jobqueue.model import fields
from jobqueue.model.tokens import (
    ADMIN_TOKEN_MIN_LENGTH,
    NAME,
    PREFIX,
    Scope,
    StoredToken,
    TokenError,
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
