"""The status codes that many routes share, described once: each route merges the
groups that apply to it (``declare``), so that its OpenAPI ``responses`` list every
code it can return. tests/unit/test_openapi.py checks that none is forgotten.
"""

from __future__ import annotations

from typing import Any

from jobqueue.api.schemas import EnqueueUnavailable, FieldErrors, Problem, StateConflict

Responses = dict[int | str, dict[str, Any]]

# Every route with a request body.
BODY: Responses = {
    400: {"description": "Malformed JSON", "model": FieldErrors},
    413: {"description": "Request body over JOBQUEUE_MAX_REQUEST_BYTES", "model": FieldErrors},
    415: {
        "description": "A body sent without Content-Type: application/json",
        "model": FieldErrors,
    },
}
# Every route with a body, a path or a query parameter.
INVALID: Responses = {
    422: {"description": "Invalid or unknown fields, each named", "model": FieldErrors},
}
# Every route that reads or writes the database.
UNAVAILABLE: Responses = {
    503: {"description": "Database unavailable; retry after `Retry-After`", "model": Problem},
}
# Routes that store jobs: their 503 says whether the jobs may have been stored.
ENQUEUE_UNAVAILABLE: Responses = {
    503: {
        "description": "Database unavailable; `stored` says whether the jobs may be stored",
        "model": EnqueueUnavailable,
    },
}
JOB_NOT_FOUND: Responses = {404: {"description": "No such job", "model": Problem}}


def conflict(description: str) -> Responses:
    return {409: {"description": description, "model": StateConflict}}


def declare(*groups: Responses) -> Responses:
    """The groups merged, later ones winning (a route's own descriptions last)."""
    merged: Responses = {}
    for group in groups:
        for status, response in group.items():
            merged[status] = {**merged.get(status, {}), **response}
    return merged
