"""The HTTP API's OpenAPI document, as generated without a database."""

from __future__ import annotations

from jobqueue.api import create_app
from jobqueue.app import JobQueue


def test_the_openapi_document_describes_every_endpoint_with_examples() -> None:
    document = create_app(JobQueue(dsn="postgresql://unused")).openapi()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert operation.get("summary"), (method, path)
            assert operation.get("description"), (method, path)
    schemas = document["components"]["schemas"]
    for name in ("Job", "NewJob", "NewJobs", "RetryFilter", "CancelFilter", "Attempt",
                 "QueueInfo", "WorkerInfo", "AuditEntry"):  # fmt: skip
        assert schemas[name].get("examples"), name
