"""POST /jobs and POST /jobs/batch are declared by their FastAPI routes and mostly served
by the lean middleware of api/enqueue.py: the document must not change with it, and
what it reads must be what the operations declare."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI

from jobqueue.api import create_app, enqueue
from jobqueue.api.media import JsonBodies
from jobqueue.app import JobQueue
from jobqueue.model.tokens import Scope

# What each lean endpoint can answer: the operation must declare every one.
ANSWERS = {
    "/jobs": {"200", "201", "400", "401", "403", "410", "413", "415", "422", "429", "503"},
    "/jobs/batch": {"201", "400", "401", "403", "413", "415", "422", "429", "503"},
}
MODELS = {"/jobs": "NewJob", "/jobs/batch": "NewJobs"}


def app() -> FastAPI:
    return create_app(JobQueue(dsn="postgresql://unused"))


def test_the_lean_middleware_is_inside_ours_and_leaves_the_document_as_it_was() -> None:
    served = app()
    # Only JsonBodies is inside it: the 415 of a body LeanEnqueue hands on.
    assert [m.cls for m in served.user_middleware][-2:] == [enqueue.LeanEnqueue, JsonBodies]
    [lean] = [m for m in served.user_middleware if m.cls is enqueue.LeanEnqueue]
    routes = lean.kwargs["routes"]
    assert {path: (r.path, r.methods) for path, r in routes.items()} == {
        "/jobs": ("/jobs", {"POST"}),
        "/jobs/batch": ("/jobs/batch", {"POST"}),
    }
    declared = app()
    declared.user_middleware = [m for m in declared.user_middleware if m is not lean]
    assert served.openapi() == declared.openapi()


def test_the_operations_declare_what_the_lean_endpoints_read_and_answer() -> None:
    document = app().openapi()
    read = {name.decode() for name in enqueue.READ_HEADERS} - {"content-type", "authorization"}
    for path, models in MODELS.items():
        operation: dict[str, Any] = document["paths"][path]["post"]
        headers = {p["name"].lower() for p in operation["parameters"] if p["in"] == "header"}
        expected = read if path == "/jobs" else read - {"idempotency-key"}
        assert headers == expected, path
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{models}"}, path
        assert operation["security"] == [{"bearerAuth": [str(Scope.ENQUEUE)]}], path
        assert operation["x-scope"] == str(Scope.ENQUEUE), path
        assert ANSWERS[path] <= set(operation["responses"]), path


def test_the_idempotency_key_bounds_are_the_declared_ones() -> None:
    operation = app().openapi()["paths"]["/jobs"]["post"]
    [key] = [p for p in operation["parameters"] if p["name"] == "Idempotency-Key"]
    [text] = [s for s in key["schema"]["anyOf"] if s["type"] == "string"]
    bounds = range(text["minLength"], text["maxLength"] + 1)
    assert bounds == enqueue.IDEMPOTENCY_KEY_LENGTH


@pytest.mark.anyio
async def test_what_the_lean_middleware_passes_by() -> None:
    """Other methods and paths, an application mounted under a prefix, and a request that
    FastAPI's OpenTelemetry instrumentation follows (its span is named by the route
    FastAPI's router selects) go on to the application untouched, body unread."""
    reached: list[str] = []

    async def rest(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    async def receive() -> Any:
        raise AssertionError("the body was read")

    async def send(message: Any) -> None:
        raise AssertionError("answered")

    lean = enqueue.LeanEnqueue(rest, routes={"/jobs": None, "/jobs/batch": None})
    http = {"type": "http", "method": "POST", "headers": []}
    for scope in [
        {**http, "method": "GET", "path": "/jobs"},
        {**http, "path": "/jobs/"},
        {**http, "path": "/jobs/1/retry"},
        {**http, "path": "/queue/jobs", "root_path": "/queue"},
        {**http, "path": "/jobs", enqueue.FASTAPI_TELEMETRY: object()},
        {**http, "path": "/jobs/batch", enqueue.FASTAPI_TELEMETRY: object()},
        {"type": "lifespan", "path": "/jobs"},
    ]:
        await lean(scope, receive, send)
    assert len(reached) == 7
