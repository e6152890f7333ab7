"""POST /jobs, POST /jobs/batch, POST /claims and POST /outcomes are declared by their
FastAPI routes and mostly served by the lean middleware of api/lean.py: the document
must not change with it, and what it reads must be what the operations declare."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI

from jobqueue.api import create_app, enqueue, lean, lean_work
from jobqueue.api.media import JsonBodies
from jobqueue.app import JobQueue
from jobqueue.model.tokens import Scope

# What each lean endpoint can answer: the operation must declare every one.
ANSWERS = {
    "/jobs": {"200", "201", "400", "401", "403", "410", "413", "415", "422", "429", "503"},
    "/jobs/batch": {"201", "400", "401", "403", "413", "415", "422", "429", "503"},
    "/claims": {"200", "400", "401", "403", "413", "415", "422", "429", "503"},
    "/outcomes": {"200", "400", "401", "403", "413", "415", "422", "429", "503"},
}
MODELS = {
    "/jobs": "NewJob",
    "/jobs/batch": "NewJobs",
    "/claims": "ClaimRequest",
    "/outcomes": "OutcomesRequest",
}
SCOPES = {
    "/jobs": Scope.ENQUEUE,
    "/jobs/batch": Scope.ENQUEUE,
    "/claims": Scope.WORK,
    "/outcomes": Scope.WORK,
}


def app() -> FastAPI:
    return create_app(JobQueue(dsn="postgresql://unused"))


def test_the_lean_middleware_is_inside_ours_and_leaves_the_document_as_it_was() -> None:
    served = app()
    # Only JsonBodies is inside it: the 415 of a body LeanRoutes hands on.
    assert [m.cls for m in served.user_middleware][-2:] == [lean.LeanRoutes, JsonBodies]
    [middleware] = [m for m in served.user_middleware if m.cls is lean.LeanRoutes]
    endpoints = middleware.kwargs["endpoints"]
    assert {path: (type(e), e.route.path, e.route.methods) for path, e in endpoints.items()} == {
        "/jobs": (enqueue.Enqueue, "/jobs", {"POST"}),
        "/jobs/batch": (enqueue.Enqueue, "/jobs/batch", {"POST"}),
        "/claims": (lean_work.Claims, "/claims", {"POST"}),
        "/outcomes": (lean_work.Outcomes, "/outcomes", {"POST"}),
    }
    declared = app()
    declared.user_middleware = [m for m in declared.user_middleware if m is not middleware]
    assert served.openapi() == declared.openapi()


def test_the_operations_declare_what_the_lean_endpoints_read_and_answer() -> None:
    document = app().openapi()
    enqueue_reads = {name.decode() for name in enqueue.READ_HEADERS}
    work_reads = {name.decode() for name in lean_work.READ_HEADERS}
    for path, models in MODELS.items():
        operation: dict[str, Any] = document["paths"][path]["post"]
        headers = {
            p["name"].lower() for p in operation.get("parameters", []) if p["in"] == "header"
        }
        read = enqueue_reads if path.startswith("/jobs") else work_reads
        expected = read - {"content-type", "authorization"}
        if path != "/jobs":
            expected -= {"idempotency-key"}
        assert headers == expected, path
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{models}"}, path
        assert operation["security"] == [{"bearerAuth": [str(SCOPES[path])]}], path
        assert operation["x-scope"] == str(SCOPES[path]), path
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

    paths = ("/jobs", "/jobs/batch", "/claims", "/outcomes")
    middleware = lean.LeanRoutes(rest, endpoints=dict.fromkeys(paths, None))  # type: ignore[arg-type]
    http = {"type": "http", "method": "POST", "headers": []}
    for scope in [
        {**http, "method": "GET", "path": "/jobs"},
        {**http, "path": "/jobs/"},
        {**http, "path": "/jobs/1/retry"},
        {**http, "path": "/queue/jobs", "root_path": "/queue"},
        {**http, "path": "/jobs", lean.FASTAPI_TELEMETRY: object()},
        {**http, "path": "/jobs/batch", lean.FASTAPI_TELEMETRY: object()},
        {**http, "path": "/claims", lean.FASTAPI_TELEMETRY: object()},
        {**http, "method": "GET", "path": "/outcomes"},
        {**http, "path": "/jobs/1/complete"},
        {"type": "lifespan", "path": "/jobs"},
    ]:
        await middleware(scope, receive, send)
    assert len(reached) == 10
