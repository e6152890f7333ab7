"""NewJob: a job as a client describes it, validated field by field (HTTP, enqueue_jobs).

The rules are those of jobqueue.model.fields; this model adds per-field errors and the
OpenAPI schema. It is not imported by the worker path (see jobqueue.model.fields).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from jobqueue.model import fields

QueueName = Annotated[str, StringConstraints(pattern=fields.QUEUE_PATTERN)]
# Text PostgreSQL can store (no NUL, no lone surrogate): any other is a 422, not a 500.
StorableText = Annotated[str, AfterValidator(fields.storable)]
# The constraints first: put after a validator, pydantic would not apply them. Stripped
# by Python's str.strip, as fields.check_type strips it when the row is built: pydantic's
# own stripping keeps characters Python strips (\x1c-\x1f), which would pass here and
# fail there.
JobType = Annotated[
    str,
    StringConstraints(min_length=1, max_length=fields.TYPE_MAX_LENGTH),
    BeforeValidator(lambda value: value.strip() if isinstance(value, str) else value),
    AfterValidator(fields.storable),
]
Payload = Annotated[dict[str, Any], AfterValidator(fields.storable_json)]
Tags = Annotated[
    list[
        Annotated[
            str,
            StringConstraints(min_length=1, max_length=fields.TAG_MAX_LENGTH),
            AfterValidator(fields.storable),
        ]
    ],
    Field(max_length=fields.TAGS_MAX),
]


def _meta(value: dict[str, Any]) -> dict[str, Any]:
    fields.meta_json(value)  # its size as JSON, and text PostgreSQL can store
    return value


Meta = Annotated[dict[str, Any], AfterValidator(_meta)]
Int32 = Annotated[int, Field(ge=fields.INT32_MIN, le=fields.INT32_MAX)]
# Python's JSON parser reads NaN and Infinity: "should be a finite number" names them,
# where the bounds alone would call NaN "not less than or equal to" the maximum.
Seconds = Annotated[float, Field(ge=0, le=fields.MAX_DELAY_SECONDS, allow_inf_nan=False)]


class NewJob(BaseModel):
    """What a client may say about a job it enqueues; everything but ``type`` is optional."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"type": "send_email", "payload": {"to": "a@example.com"}},
                {"type": "report", "payload": {"id": 7}, "queue": "reports", "delay_seconds": 60},
            ]
        },
    )

    type: JobType = Field(description="Job type; a handler registered for it runs the job.")
    payload: Payload = Field(default_factory=dict, description="JSON object handed to the handler.")
    queue: QueueName | None = Field(
        default=None, description="Queue name; default: the task's queue, else `default`."
    )
    priority: Int32 | None = Field(
        default=None, description="Lower runs first; default: the task's priority, else 0."
    )
    max_attempts: Annotated[int, Field(ge=1, le=fields.MAX_ATTEMPTS_LIMIT)] | None = Field(
        default=None, description="Attempts before the job stays failed; default MAX_ATTEMPTS."
    )
    run_at: AwareDatetime | None = Field(
        default=None, description="Do not start before this time (with a time zone)."
    )
    delay_seconds: Seconds | None = Field(
        default=None, description="Do not start before this many seconds from now."
    )

    concurrency_key: (
        Annotated[
            str,
            StringConstraints(min_length=1, max_length=fields.CONCURRENCY_KEY_MAX_LENGTH),
            AfterValidator(fields.storable),
        ]
        | None
    ) = Field(
        default=None,
        description="Its concurrency key, for its queue's key limits (default: the value of "
        "its task's concurrency_key payload field); see the Limits guide.",
    )
    unique_key: (
        Annotated[
            str,
            StringConstraints(min_length=1, max_length=fields.UNIQUE_KEY_MAX_LENGTH),
            AfterValidator(fields.storable),
        ]
        | None
    ) = Field(
        default=None,
        description="While a job with this key is pending or running (or completed less "
        "than `unique_for` seconds ago), no new job is stored: the answer is that job, "
        "with 200 instead of 201. Unlike the `Idempotency-Key` header, the key is free "
        "again once its job ended (docs/unique-jobs.md).",
    )
    unique_for: Seconds | None = Field(
        default=None, description="Seconds the key stays taken after the job completed."
    )
    on_conflict: Literal["return", "replace", "debounce"] | None = Field(
        default=None,
        description="While a pending job holds the key: `return` it (default, 200); "
        "`replace` its payload, priority and run time (200, same id); `debounce` it: its "
        "payload, and a run time of now + `delay_seconds` (200). A running holder is "
        "never changed: `replace` and `debounce` store a new job behind it (201).",
    )

    tags: Tags | None = Field(
        default=None,
        description=f"Up to {fields.TAGS_MAX} tags of up to {fields.TAG_MAX_LENGTH} "
        "characters, to find the job by (`GET /jobs?tag=`); each is kept once.",
    )
    meta: Meta | None = Field(
        default=None,
        description=f"A JSON object of up to {fields.META_MAX_BYTES} bytes, to find the job "
        "by (`GET /jobs?meta.customer=acme`): who or what it is for.",
    )

    @model_validator(mode="after")
    def consistent(self) -> NewJob:
        if self.run_at is not None and self.delay_seconds is not None:
            raise ValueError("give run_at or delay_seconds, not both")
        if self.unique_for is not None and self.unique_key is None:
            raise ValueError("unique_for needs a unique_key")
        if self.on_conflict not in (None, "return") and self.unique_key is None:
            raise ValueError("on_conflict needs a unique_key")
        if self.on_conflict == "debounce" and self.delay_seconds is None:
            raise ValueError("on_conflict debounce needs delay_seconds (the quiet time)")
        return self
