"""A new job's row from what enqueue was given: every value checked (ValueError naming
the field), the task's defaults filled in, the payload checked against its task's
payload type and encoded as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobqueue.config import Settings
from jobqueue.db.records import JobOptions, JobRow
from jobqueue.model import fields
from jobqueue.task import Task, job_options

if TYPE_CHECKING:
    from jobqueue.enqueue.new_job import NewJob

# One encoder for every call: json.dumps with options builds a new one each time.
# allow_nan=False: NaN is not JSON, and jsonb would refuse the INSERT (with every job
# sharing it, until each is tried alone).
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class Rows:
    def __init__(self, tasks: Mapping[str, Task[Any, Any]], settings: Settings) -> None:
        self._tasks = tasks
        self._settings = settings

    def row(
        self,
        type: str,
        payload: Any,
        *,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        run_at: datetime | None,
        delay_seconds: float | None,
        trace: str | None = None,
        concurrency_key: str | None = None,
    ) -> JobRow:
        """``trace``: the trace context to record (observability/trace_context.py).
        ``concurrency_key``: the job's key, else the one its task's payload field gives."""
        options = self.options(
            type,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=run_at,
            delay_seconds=delay_seconds,
        )
        encoded = self.payload(options.type, payload)
        return JobRow(
            options.type,
            options.queue,
            options.priority,
            options.max_attempts,
            options.run_at,
            options.delay_seconds,
            encoded,
            trace,
            self.concurrency_key(options.type, encoded, concurrency_key),
        )

    def row_of(self, spec: NewJob, trace: str | None = None) -> JobRow:
        """The row of a job POST /jobs described (already validated by pydantic)."""
        return self.row(
            spec.type,
            spec.payload,
            queue=spec.queue,
            priority=spec.priority,
            max_attempts=spec.max_attempts,
            run_at=spec.run_at,
            delay_seconds=spec.delay_seconds,
            trace=trace,
            concurrency_key=spec.concurrency_key,
        )

    def options(
        self,
        type: str,
        *,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        run_at: datetime | None,
        delay_seconds: float | None,
    ) -> JobOptions:
        type = fields.check_type(type)
        fields.check_options(
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=run_at,
            delay_seconds=delay_seconds,
        )
        queue, priority, max_attempts = job_options(
            self._tasks.get(type), self._settings, queue, priority, max_attempts
        )
        return JobOptions(type, queue, priority, max_attempts, run_at, delay_seconds)

    def concurrency_key(self, type: str, payload: str, given: str | None = None) -> str | None:
        """The key ``given``, else the value of the payload field (JSON text) that the
        task names as its key, else None (docs/limits.md)."""
        if given is not None:
            return fields.check_concurrency_key(given)
        task = self._tasks.get(type)
        if task is None or task.concurrency_key is None:
            return None
        value = json.loads(payload).get(task.concurrency_key)
        return fields.check_concurrency_key(value, f"payload.{task.concurrency_key}")

    def payloads(self, type: str, payloads: Iterable[Any]) -> tuple[list[str], list[str | None]]:
        """Each payload as ``payload`` makes it, and its concurrency key as
        ``concurrency_key`` finds it (ValueError names the payload by its index). The
        task is looked up once: enqueue_many runs this for thousands of payloads."""
        task = self._tasks.get(type)
        if task is not None and (task.payload_type is not None or task.concurrency_key):
            encoded, keys = [], []
            for i, payload in enumerate(payloads):
                try:
                    encoded.append(self.payload(type, payload))
                    keys.append(self.concurrency_key(type, encoded[-1]))
                except ValueError as exc:
                    raise ValueError(f"payloads[{i}]: {exc}") from exc
            return encoded, keys
        encode = _JSON.encode
        encoded = []
        for i, payload in enumerate(payloads):
            if not payload:  # None, or an empty mapping
                if payload is not None and not isinstance(payload, Mapping):
                    raise ValueError(f"payloads[{i}]: payload: must be a mapping (a JSON "
                                     f"object), got {payload!r}")  # fmt: skip
                encoded.append("{}")
            elif isinstance(payload, Mapping):
                try:
                    encoded.append(encode(payload))
                except ValueError as exc:  # NaN or Infinity: not JSON
                    found = fields.unencodable(payload, "payload", exc)
                    raise ValueError(f"payloads[{i}]: {found}") from exc
            else:
                raise ValueError(f"payloads[{i}]: payload: must be a mapping (a JSON "
                                 f"object), got {payload!r}")  # fmt: skip
        return encoded, [None] * len(encoded)

    def payload(self, type: str, payload: Any) -> str:
        """The payload to store, as JSON: checked against the task's payload type, if it
        has one (PayloadError), else required to be a mapping."""
        task = self._tasks.get(type)
        if task is not None and task.payload_type is not None:
            payload = task.dump({} if payload is None else payload)
        elif payload is None:
            return "{}"
        else:
            fields.check_options(payload=payload)
        try:
            return _JSON.encode(payload)
        except ValueError as exc:  # NaN or Infinity: ValueError naming the field
            raise fields.unencodable(payload, "payload", exc) from None
