"""JSON text as jobqueue stores and reads it: the standard library's C encoder and C
scanner, called directly.

``json.JSONEncoder.encode`` and ``json.loads`` wrap the same C code in a few layers of
Python: ``encode`` builds a new C encoder for every value, and ``loads`` matches
whitespace before and after the value. For the small objects of a job (a payload,
metadata, a result) the wrapping is more than half the time: on the 2-core machine of
docs/benchmarks.md (2026-12-07) a two-key object took 4.2 µs to encode and 3.7 µs to
decode through them, against 2.1 and 1.3 µs directly. An enqueue with a payload
encodes it, and decodes it into the Job it returns; a worker decodes every payload it
claims.

Both give the standard library's results and errors; where the direct call cannot
tell (a value that holds itself, text with whitespace around it), the standard
library is asked instead.
"""

from __future__ import annotations

import json
import json.encoder
import json.scanner
from collections.abc import Callable
from typing import Any

# None where the interpreter has no C accelerator (the encoder then is json's own).
_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)

# Any: typeshed types make_scanner's argument as the class it returns, not a decoder.
_DECODER: Any = json.JSONDecoder()
_SCAN: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(_DECODER)


class Encoder:
    """``json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=...)``'s
    ``encode``, with its errors: TypeError for a value JSON has no form for, ValueError
    for NaN, an infinity or a value that holds itself."""

    def __init__(self, *, ensure_ascii: bool = True) -> None:
        self._json = json.JSONEncoder(
            separators=(",", ":"), allow_nan=False, ensure_ascii=ensure_ascii
        )
        self._encode: Callable[[Any, int], tuple[str, ...] | list[str]] | None = None
        if _C_MAKE_ENCODER is not None:
            text = (json.encoder.encode_basestring_ascii if ensure_ascii
                    else json.encoder.encode_basestring)  # fmt: skip
            # No circular check: its marks would be shared by every thread using this
            # encoder, and left behind by a value that fails. A value that holds itself
            # recurses until RecursionError instead, and json's own encoder, which
            # checks, then names it.
            self._encode = _C_MAKE_ENCODER(
                None, self._json.default, text, None, ":", ",", False, False, False
            )

    def encode(self, value: Any) -> str:
        if self._encode is None:
            return self._json.encode(value)
        try:
            return "".join(self._encode(value, 0))
        except RecursionError:
            return self._json.encode(value)


# The text jobqueue stores (payloads, metadata, results): compact and ASCII, and NaN
# refused, which is not JSON and which jsonb would refuse with the whole statement.
dumps: Callable[[Any], str] = Encoder().encode


def loads(text: str) -> Any:
    """``json.loads(text)``: directly for text that starts and ends with its value, as
    the JSON jobqueue writes and PostgreSQL's ``jsonb`` output do."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:  # no value at the start: json.loads raises its error
        return json.loads(text)
    if end != len(text):  # whitespace after it, or extra data
        return json.loads(text)
    return value
