"""A job type declared ahead of any worker (`jobqueue types add`): enqueueing it does
not wait for a worker to announce it, and its payloads may be held to a JSON Schema
(jobqueue.job_types checks them; docs/http-workers.md#declared-types)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class DeclaredType:
    name: str
    # A JSON Schema each payload of the type must match; None: any JSON object.
    payload_schema: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
