"""Every route's OpenAPI ``responses`` list the codes it can return that it shares with
other routes: a new route that forgets one fails here, not in a client's hands."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, Any

from fastapi import Body, FastAPI

from jobqueue.api import create_app
from jobqueue.app import JobQueue

# Routes that answer without reading the database: the only ones without a 503.
# /metrics reads no table, but its token may need reading (a 503 if it cannot be).
NO_DATABASE = {("get", "/healthz"), ("get", "/openapi.json")}
METHODS = {"get", "post", "put", "patch", "delete"}


def undeclared(document: dict[str, Any]) -> list[str]:
    """What each operation should declare and does not: 400, 413, 415 and 422 with a body
    (malformed JSON, over JOBQUEUE_MAX_REQUEST_BYTES, not JSON, invalid fields), 422 with a path
    or query parameter, 503 if it reads the database, a description for every code."""
    problems = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method not in METHODS:
                continue
            codes = set(operation["responses"])
            needed = set()
            if "requestBody" in operation:
                needed |= {"400", "413", "415", "422"}
            if any(p["in"] in ("path", "query") for p in operation.get("parameters", [])):
                needed.add("422")
            if (method, path) not in NO_DATABASE:
                needed.add("503")
            problems += [f"{method} {path}: {code}" for code in sorted(needed - codes)]
            problems += [
                f"{method} {path}: {code} has no description"
                for code, response in operation["responses"].items()
                if code != "default" and not described(int(code), response)
            ]
    return problems


def described(code: int, response: dict[str, Any]) -> bool:
    """FastAPI fills in the status's phrase for a code declared without a description,
    and adds a 422 of its own (with another body than api/errors.py's) to any route
    with parameters that declares none."""
    text = response.get("description", "")
    return bool(text) and text not in (HTTPStatus(code).phrase, "Validation Error")


def test_every_route_declares_the_codes_it_shares() -> None:
    document = create_app(JobQueue(dsn="postgresql://unused")).openapi()
    assert undeclared(document) == []
    operations = {(m, p) for p, ops in document["paths"].items() for m in ops}
    assert NO_DATABASE - {("get", "/openapi.json")} <= operations  # the list is not stale


def test_a_route_that_forgets_them_is_found() -> None:
    app = FastAPI()

    @app.post("/things/{id}")
    async def make(id: int, thing: Annotated[dict[str, Any], Body()]) -> None: ...

    @app.get("/healthz", responses={418: {}})
    async def healthz() -> None: ...

    assert undeclared(app.openapi()) == [
        "post /things/{id}: 400",
        "post /things/{id}: 413",
        "post /things/{id}: 415",
        "post /things/{id}: 503",
        "post /things/{id}: 422 has no description",
        "get /healthz: 418 has no description",
    ]
