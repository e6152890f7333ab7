"""The Idempotency-Key header of POST /jobs (IETF draft "The Idempotency-Key HTTP
Header Field"): its syntax, and the request it is bound to.

The value is a structured-field string, ``"8e03978e-40d5-43e8-bc93-6894a57f9324"``;
a bare value (``8e03978e-...``, what clients sent before) names the same key. A key
is bound to a hash of the canonical request, the validated NewJob as JSON with sorted
keys: a retry of the same request matches however its JSON was spelled.
"""

from __future__ import annotations

import hashlib
import json

from jobqueue.enqueue.new_job import NewJob
from jobqueue.model import fields

HEADER = "Idempotency-Key"
# A structured-field string: printable ASCII, with \" and \\ its only escapes.
_PRINTABLE = frozenset(chr(c) for c in range(0x20, 0x7F))


def parse(value: str) -> str:
    """The key a header value names; ValueError says what is wrong with it."""
    key = _sf_string(value) if value.startswith('"') else _bare(value)
    if not 1 <= len(key) <= fields.UNIQUE_KEY_MAX_LENGTH:
        raise ValueError(f"must be 1 to {fields.UNIQUE_KEY_MAX_LENGTH} characters")
    return key


def _sf_string(value: str) -> str:
    chars: list[str] = []
    i = 1
    while i < len(value):
        c = value[i]
        if c == "\\":
            if value[i + 1 : i + 2] not in ('"', "\\"):
                raise ValueError('a quoted key escapes only \\" and \\\\')
            chars.append(value[i + 1])
            i += 2
            continue
        if c == '"':
            if value[i + 1 :].strip():
                raise ValueError("nothing may follow the quoted key")
            return "".join(chars)
        if c not in _PRINTABLE:
            raise ValueError("a key is printable ASCII")
        chars.append(c)
        i += 1
    raise ValueError("the quoted key has no closing quote")


def _bare(value: str) -> str:
    if any(c not in _PRINTABLE or c in '"\\' for c in value):
        raise ValueError('a key is printable ASCII; quote it ("...") to use " or \\')
    return value


def request_hash(new: NewJob) -> bytes:
    canonical = json.dumps(new.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).digest()
