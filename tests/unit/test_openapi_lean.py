"""POST /jobs and POST /jobs/batch are declared by their FastAPI routes and mostly served
by the lean endpoints of api/enqueue.py: the document must not change with them, and
what the lean endpoints read must be what the operations declare."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from jobqueue.api import create_app, enqueue
from jobqueue.app import JobQueue
from jobqueue.tokens import Scope

# What each lean endpoint can answer: the operation must declare every one.
ANSWERS = {
    "/jobs": {"200", "201", "400", "401", "403", "410", "413", "422", "429", "503"},
    "/jobs/batch": {"201", "400", "401", "403", "413", "422", "429", "503"},
}
MODELS = {"/jobs": "NewJob", "/jobs/batch": "NewJobs"}


def app() -> FastAPI:
    return create_app(JobQueue(dsn="postgresql://unused"))


def test_the_lean_routes_come_first_and_leave_the_document_as_it_was() -> None:
    served = app()
    lean = [r for r in served.router.routes if isinstance(r, enqueue.LeanRoute)]
    assert [r.path for r in lean] == ["/jobs", "/jobs/batch"]
    assert served.router.routes[: len(lean)] == lean  # tried before FastAPI's routes
    declared = app()
    declared.router.routes[:] = [r for r in declared.router.routes if r not in lean]
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
