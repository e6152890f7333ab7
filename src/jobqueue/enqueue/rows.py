"""A new job's row from what enqueue was given: every value checked (ValueError naming
the field), the task's defaults filled in, the payload checked against its task's
payload type and encoded as JSON."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from jobqueue.config import Settings
from jobqueue.db.records import JobOptions, JobRow, UniqueKey
from jobqueue.model import fields, json_text
from jobqueue.model.options import JOB_OPTIONS, BatchOptions, ManyOptions
from jobqueue.task import Task, job_options

if TYPE_CHECKING:
    from jobqueue.enqueue.new_job import NewJob


@dataclass(frozen=True, slots=True)
class Batch:
    """``enqueue_many``'s jobs, checked: one type and options, and per job its payload
    (JSON text), concurrency key and unique key (None: no job has one)."""

    options: JobOptions
    payloads: list[str]
    keys: list[str | None]
    tags: list[str] | None
    meta: str | None
    uniques: list[UniqueKey | None] | None

    def rows(self, trace: str | None) -> list[JobRow]:
        """Its rows, one per payload, for a batch that is not one statement."""
        o = self.options
        shared = (o.type, o.queue, o.priority, o.max_attempts, o.run_at, o.delay_seconds)
        return [JobRow(*shared, payload, trace, key, self.tags, self.meta)
                for payload, key in zip(self.payloads, self.keys, strict=True)]  # fmt: skip


class Rows:
    def __init__(self, tasks: Mapping[str, Task[Any, Any]], settings: Settings) -> None:
        self._tasks = tasks
        self._settings = settings

    def row(
        self, type: str, payload: Any, options: BatchOptions, trace: str | None = None
    ) -> JobRow:
        """The row of a job enqueued from Python, every option checked (ValueError naming
        the field; TypeError naming a keyword that is no option). ``trace``: the trace
        context to record (observability/trace_context.py)."""
        # No options, as most enqueues give: nothing to check, no tags nor metadata.
        tags, meta = _check(options) if options else (None, None)
        return self._row(type, payload, options, trace, tags, meta)

    def row_of(self, spec: NewJob, trace: str | None = None) -> JobRow:
        """The row of a job POST /jobs described: pydantic has checked its options by the
        same rules (jobqueue.enqueue.new_job), and its fields are its options' names, so
        its ``__dict__`` is read as they are, with no dict built per request."""
        options = cast("BatchOptions", spec.__dict__)
        tags, meta = options.get("tags"), options.get("meta")
        return self._row(
            spec.type, spec.payload, options, trace,
            None if not tags else list(dict.fromkeys(tags)),
            None if not meta else json_text.dumps(meta),
        )  # fmt: skip

    def options(
        self, type: str, options: BatchOptions
    ) -> tuple[JobOptions, list[str] | None, str | None]:
        """A batch's type and options, checked, with its task's defaults; and its tags
        and metadata as stored."""
        tags, meta = _check(options)
        return self._resolved(type, options), tags, meta

    def batch(self, type: str, payloads: Iterable[Any], options: ManyOptions) -> Batch:
        """``enqueue_many``'s jobs, every option and payload checked (ValueError naming
        the field, a payload or a unique key by its index)."""
        shared, unique = split_unique(options)
        resolved, tags, meta = self.options(type, shared)
        encoded, keys = self.payloads(resolved.type, payloads)
        given = shared.get("concurrency_key")
        if given is not None:
            keys = [fields.check_concurrency_key(given)] * len(encoded)
        uniques = unique_keys(unique, len(encoded), resolved.delay_seconds)
        return Batch(resolved, encoded, keys, tags, meta, uniques)

    def _row(
        self,
        type: str,
        payload: Any,
        options: BatchOptions,
        trace: str | None,
        tags: list[str] | None,
        meta: str | None,
    ) -> JobRow:
        # The options are checked (by _check, or NewJob's validators), ``tags`` and
        # ``meta`` as stored. The concurrency key is the option's, else the one its
        # task's payload field gives.
        resolved = self._resolved(type, options)
        encoded = self.payload(resolved.type, payload)
        return JobRow(
            resolved.type,
            resolved.queue,
            resolved.priority,
            resolved.max_attempts,
            resolved.run_at,
            resolved.delay_seconds,
            encoded,
            trace,
            self.concurrency_key(resolved.type, encoded, options.get("concurrency_key")),
            tags,
            meta,
        )

    def _resolved(self, type: str, options: BatchOptions) -> JobOptions:
        """The type checked, and the options with its task's defaults, else the settings'."""
        type = fields.check_type(type)
        queue, priority, max_attempts = job_options(
            self._tasks.get(type),
            self._settings,
            options.get("queue"),
            options.get("priority"),
            options.get("max_attempts"),
        )
        run_at, delay_seconds = options.get("run_at"), options.get("delay_seconds")
        return JobOptions(type, queue, priority, max_attempts, run_at, delay_seconds)

    def concurrency_key(self, type: str, payload: str, given: str | None = None) -> str | None:
        """The key ``given``, else the value of the payload field (JSON text) that the
        task names as its key, else None (docs/limits.md)."""
        if given is not None:
            return fields.check_concurrency_key(given)
        task = self._tasks.get(type)
        if task is None or task.concurrency_key is None:
            return None
        value = json_text.loads(payload).get(task.concurrency_key)
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
        encode = json_text.dumps
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
        elif payload is None or (payload.__class__ is dict and not payload):
            return "{}"
        elif payload.__class__ is not dict:  # a dict needs no check
            fields.check_options(payload=payload)
        try:
            return json_text.dumps(payload)
        except ValueError as exc:  # NaN or Infinity: ValueError naming the field
            raise fields.unencodable(payload, "payload", exc) from None


def split_unique(options: ManyOptions) -> tuple[BatchOptions, ManyOptions]:
    """``enqueue_many``'s options: those every job shares, and its unique keys."""
    batch = cast("dict[str, Any]", dict(options))
    if "unique_key" in batch:
        raise TypeError("enqueue_many: unique_keys=[...] gives each payload its own key")
    unique = {name: batch.pop(name) for name in ("unique_keys", "unique_for", "on_conflict")
              if name in batch}  # fmt: skip
    return cast("BatchOptions", batch), cast("ManyOptions", unique)


def unique_keys(
    unique: ManyOptions, count: int, delay_seconds: float | None
) -> list[UniqueKey | None] | None:
    """Each of ``count`` payloads' unique key, checked as ``enqueue`` checks one
    (ValueError naming the key by its index); None when no payload has one."""
    keys, hold, on_conflict = (
        unique.get("unique_keys"),
        unique.get("unique_for"),
        unique.get("on_conflict"),
    )
    if keys is None:
        for name, value in (("unique_for", hold), ("on_conflict", on_conflict)):
            if value is not None:
                raise ValueError(f"{name}: needs unique_keys")
        return None
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
        raise ValueError(f"unique_keys: must be a list of keys (or None), one per payload, "
                         f"got {keys!r}")  # fmt: skip
    if len(keys) != count:
        raise ValueError(f"unique_keys: {len(keys)} keys for {count} payloads")
    uniques: list[UniqueKey | None] = []
    for i, key in enumerate(keys):
        if key is not None:
            try:
                fields.check_options(unique_key=key, unique_for=hold, on_conflict=on_conflict,
                                     delay_seconds=delay_seconds)  # fmt: skip
            except ValueError as exc:
                raise ValueError(f"unique_keys[{i}]: {exc}") from None
        uniques.append(UniqueKey.of(key, hold, on_conflict))
    return uniques if any(uniques) else None


def _check(options: BatchOptions) -> tuple[list[str] | None, str | None]:
    """The tags and metadata as stored (fields.check_options); ValueError naming the
    first option that breaks a rule (a unique key given too is checked too); TypeError
    naming a keyword that is no option."""
    try:
        return fields.check_options(**options)
    except TypeError:
        unknown = sorted(set(options) - set(JOB_OPTIONS))
        raise TypeError(f"unknown job options: {', '.join(unknown)}") from None
