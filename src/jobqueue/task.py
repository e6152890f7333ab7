"""Task: a registered handler, the defaults its jobs get, and the type of its payload.

A handler's first parameter receives the job's payload. Annotated with a pydantic
model, a dataclass or a TypedDict, the payload is checked against that type when the
job is enqueued (from Python or over HTTP, every bad field named) and again when it
runs, and the handler receives an instance of it. Otherwise the handler receives the
JSON object as a dict, unchecked:

    class Email(BaseModel):
        to: str
        subject: str = ""

    @jq.task("send_email", queue="mail")
    async def send_email(email: Email, ctx: JobContext) -> None: ...

    send_email.enqueue(Email(to="a@b.c"))                  # mypy checks the payload's type
    await send_email.enqueue_async(Email(to="a@b.c"), delay_seconds=60)
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import importlib
import inspect
import sys
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Protocol, TypeVar, cast

import typing_extensions

from jobqueue.config import Settings
from jobqueue.cron import Schedule, parse_entries
from jobqueue.model import fields
from jobqueue.model.options import JOB_OPTIONS, EnqueueOptions
from jobqueue.retry import RetryPolicy

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from jobqueue.db.connections import AppConnection
    from jobqueue.model.job import Job

M = TypeVar("M")
R = TypeVar("R")


class PayloadError(ValueError):
    """A payload that does not match its task's type. ``errors``: one per bad field,
    ``{"loc": ("to",), "msg": "Field required", "type": "missing"}``."""

    def __init__(self, task_type: str, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        fields = "; ".join(
            ".".join(["payload", *(str(p) for p in e["loc"])]) + f": {e['msg']}" for e in errors
        )
        super().__init__(f"payload of {task_type!r} is invalid: {fields}")


class Enqueuing(Protocol):
    """What a Task stores its jobs through: its JobQueue. A protocol, so that tasks do
    not import the JobQueue that imports them."""

    @property
    def enqueue(self) -> Callable[..., Awaitable[Job]]: ...
    @property
    def enqueue_sync(self) -> Callable[..., Job]: ...


def task_decorator(
    tasks: dict[str, Task[Any, Any]],
    jobqueue: Enqueuing,
    type: str,
    *,
    queue: str | None,
    max_attempts: int | None,
    priority: int | None,
    timeout: float | None,
    isolated: bool,
    retry: RetryPolicy | None,
    cron: str | None,
    cron_timezone: str,
    concurrency_key: str | None = None,
) -> TaskDecorator:
    """``JobQueue.task``: the options checked now, and a decorator that registers its
    function in ``tasks`` as the handler of ``type``."""
    type = fields.check_type(type)
    fields.check_options(queue=queue, max_attempts=max_attempts, priority=priority)
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if retry is not None and not callable(retry):
        raise ValueError(f"retry must be a callable (attempt) -> seconds, got {retry!r}")
    schedule = None if cron is None else Schedule(type, cron, cron_timezone)
    if concurrency_key is not None and not (isinstance(concurrency_key, str) and concurrency_key):
        raise ValueError(f"concurrency_key must name a payload field, got {concurrency_key!r}")

    def register(fn: Callable[..., Any]) -> Task[Any, Any]:
        if type in tasks:
            raise ValueError(f"a handler for job type {type!r} is already registered")
        task: Task[Any, Any] = Task(
            type, fn, jobqueue, queue, max_attempts, priority, timeout, isolated, retry, schedule,
            concurrency_key,
        )  # fmt: skip
        if isolated and task.is_async:
            raise ValueError("isolated=True is for sync handlers; async ones are cancelled")
        tasks[type] = task
        return task

    return register


def job_options(
    task: Task[Any, Any] | None,
    settings: Settings,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
) -> tuple[str, int, int]:
    """A job's queue, priority and max_attempts: its own, else its task's, else the defaults."""
    if task is not None:  # written out: this runs for every job enqueued
        if priority is None:
            priority = task.priority
        if max_attempts is None:
            max_attempts = task.max_attempts
    return (
        queue or (task and task.queue) or "default",
        0 if priority is None else priority,
        settings.max_attempts if max_attempts is None else max_attempts,
    )


def schedules(
    settings: Settings, tasks: Mapping[str, Task[Any, Any]]
) -> list[tuple[Schedule, tuple[str, int, int]]]:
    """The periodic jobs: those declared on tasks, then JOBQUEUE_CRON's; each with the
    queue, priority and max_attempts its jobs get (from their task, if this process
    has one)."""
    declared = [t.schedule for t in tasks.values() if t.schedule is not None]
    configured = parse_entries(tuple(settings.cron.split(";"))) if settings.cron else []
    return [
        (schedule, job_options(tasks.get(schedule.type), settings))
        for schedule in [*declared, *configured]
    ]


class TaskDecorator(Protocol):
    """What ``JobQueue.task(...)`` returns: it turns a handler into a Task whose
    payload type is the handler's first parameter's."""

    def __call__(self, fn: Callable[Concatenate[M, ...], R], /) -> Task[M, R]: ...


@dataclasses.dataclass(frozen=True, eq=False)
class Task(Generic[M, R]):
    """A registered handler and the defaults its jobs get. Calling it calls the handler."""

    type: str
    fn: Callable[..., R]
    jobqueue: Enqueuing = dataclasses.field(repr=False)
    queue: str | None = None
    max_attempts: int | None = None
    priority: int | None = None
    timeout: float | None = None
    isolated: bool = False
    retry: RetryPolicy | None = None
    schedule: Schedule | None = None
    # The payload field whose value is each job's concurrency key (docs/limits.md).
    concurrency_key: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        # By name, like the function it replaces in its module: an isolated handler's
        # child process imports it (a Task's JobQueue holds locks and cannot pickle).
        return (_by_name, (self.fn.__module__, self.fn.__qualname__))

    @functools.cached_property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    @functools.cached_property
    def takes_context(self) -> bool:
        """True if the handler has a second parameter, for the JobContext."""
        params = inspect.signature(self.fn).parameters.values()
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)

    @functools.cached_property
    def payload_type(self) -> builtins.type | None:
        """The class payloads are checked as (the first parameter's annotation, if it is
        a pydantic model, a dataclass or a TypedDict); None: a plain dict, unchecked.

        Resolved on first use, so that the annotation may name a class defined after the
        handler; an annotation that cannot be resolved raises TypeError naming it."""
        params = list(inspect.signature(self.fn).parameters)
        if not params:
            return None
        try:
            hints = typing.get_type_hints(self.fn)
        except Exception as exc:
            raise TypeError(
                f"cannot resolve the annotations of the handler of {self.type!r}: {exc}"
            ) from exc
        annotation = hints.get(params[0])
        return annotation if _is_model(annotation) else None

    def prepare(self) -> None:
        """Resolve the payload type and build its validator now, so that a bad
        annotation fails a worker's start rather than its jobs."""
        _ = self._adapter

    @functools.cached_property
    def _adapter(self) -> TypeAdapter[Any] | None:
        if self.payload_type is None:
            return None
        # pydantic is imported only by applications with typed tasks (see jobqueue.model.fields).
        from pydantic import TypeAdapter

        return TypeAdapter(_for_pydantic(self.payload_type))

    def dump(self, payload: Any) -> dict[str, Any]:
        """The payload as the JSON object to store: checked against the payload type (an
        instance of it, or a mapping of its fields) with its defaults filled in.
        Raises PayloadError."""
        if self._adapter is None:
            return payload  # type: ignore[no-any-return]  # checked by jobqueue.model.fields
        dumped: dict[str, Any] = self._adapter.dump_python(self._validate(payload), mode="json")
        return dumped

    def load(self, payload: Any) -> Any:
        """A stored payload as the handler's argument. Raises PayloadError."""
        return payload if self._adapter is None else self._validate(payload)

    def _validate(self, payload: Any) -> Any:
        from pydantic import ValidationError

        assert self._adapter is not None
        try:
            return self._adapter.validate_python(payload)
        except ValidationError as exc:
            errors = [
                {"loc": tuple(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()
            ]
            raise PayloadError(self.type, errors) from None

    # -- enqueueing ------------------------------------------------------------

    def _payload(self, payload: Any, fields: dict[str, Any]) -> Any:
        """The payload given, or built from keyword fields (each one a field of the
        payload type: a misspelt option must not pass for a field)."""
        if not fields:
            return payload
        if payload is not None:
            raise TypeError("give the payload or its fields as keywords, not both")
        known = _field_names(self.payload_type)
        for name in fields:
            if known is not None and name not in known:
                assert self.payload_type is not None
                raise TypeError(
                    f"{self.type}: {name!r} is neither an option nor a field of "
                    f"{self.payload_type.__name__}"
                )
        return fields

    def enqueue(self, payload: M | None = None, /, *, conn: Any = None, **given: Any) -> Job:
        """Store a job of this task from code without an event loop: its payload, or
        the payload's fields as keywords (``send_email.enqueue(to="a@b.c")``). The
        options (the keywords named in jobqueue.model.options) and ``conn`` are those of
        ``JobQueue.enqueue_sync``; jobqueue's mypy plugin types them all (jobqueue.mypy).
        Raises PayloadError."""
        options, fields = _options_and_fields(given)
        return self.jobqueue.enqueue_sync(
            self.type, self._payload(payload, fields), conn=conn, **options
        )

    async def enqueue_async(
        self, payload: M | None = None, /, *, conn: AppConnection | None = None, **given: Any
    ) -> Job:
        """Store a job of this task: its payload, or the payload's fields as keywords.
        The options and ``conn`` are those of ``JobQueue.enqueue``. Raises
        PayloadError."""
        options, fields = _options_and_fields(given)
        return await self.jobqueue.enqueue(
            self.type, self._payload(payload, fields), conn=conn, **options
        )


def _options_and_fields(given: dict[str, Any]) -> tuple[EnqueueOptions, dict[str, Any]]:
    """The job's options among the keywords given, and the rest: the payload's fields.
    A field named like an option must go in the payload object."""
    if not given:
        return {}, given
    options = {name: given.pop(name) for name in JOB_OPTIONS if name in given}
    return cast("EnqueueOptions", options), given


def _field_names(payload_type: builtins.type | None) -> set[str] | None:
    """The fields of a payload type; None for a plain dict (any key goes)."""
    if payload_type is None:
        return None
    if dataclasses.is_dataclass(payload_type):
        return {f.name for f in dataclasses.fields(payload_type)}
    model_fields = getattr(payload_type, "model_fields", None)  # pydantic
    if model_fields is not None:
        return set(model_fields)
    return set(typing.get_type_hints(payload_type))  # a TypedDict


def _is_model(annotation: Any) -> bool:
    if not isinstance(annotation, type):
        return False
    if dataclasses.is_dataclass(annotation) or typing_extensions.is_typeddict(annotation):
        return True
    # A pydantic model, recognised without importing pydantic.
    return any(
        c.__module__.startswith("pydantic.") and c.__name__ == "BaseModel"
        for c in annotation.__mro__
    )


def _by_name(module: str, qualname: str) -> Any:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _for_pydantic(payload_type: type) -> Any:
    """pydantic refuses typing.TypedDict before Python 3.12; the same TypedDict rebuilt
    with typing_extensions, every key as required or not as declared, it accepts."""
    if not typing.is_typeddict(payload_type) or sys.version_info >= (3, 12):
        return payload_type
    # With postponed annotations, the class saw "NotRequired[int]" as text and counted
    # the key as required: the resolved hints say what was meant.
    hints = typing.get_type_hints(payload_type, include_extras=True)
    required = payload_type.__required_keys__  # type: ignore[attr-defined]
    fields = {
        key: hint
        if typing.get_origin(hint) in (typing.Required, typing.NotRequired)
        else typing_extensions.Required[hint]
        if key in required
        else typing_extensions.NotRequired[hint]
        for key, hint in hints.items()
    }
    return typing_extensions.TypedDict(payload_type.__name__, fields)  # type: ignore[operator]
