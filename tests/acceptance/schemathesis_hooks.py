"""Schemathesis hooks for tests/acceptance/test_schemathesis.py, loaded through
SCHEMATHESIS_HOOKS.

A claim's long poll, when nothing is due, waits for all of its `wait_seconds` (up to
60 s), past the client's request timeout. schemathesis.toml cannot pin a body property
(its `parameters` fix path, query, header and cookie values only), so each claim's wait
is cut to a fifth of a second just before it is sent. Its bounds are checked by
tests/acceptance/test_http_workers.py."""

from __future__ import annotations

from typing import Any

import schemathesis

LONGEST_WAIT_SECONDS = 0.2


@schemathesis.hook
def before_call(context: Any, case: Any, **kwargs: Any) -> None:
    if case.operation.label != "POST /claims" or not isinstance(case.body, dict):
        return
    wait = case.body.get("wait_seconds")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and wait > LONGEST_WAIT_SECONDS:
        case.body["wait_seconds"] = LONGEST_WAIT_SECONDS
