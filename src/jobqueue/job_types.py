"""Job types declared ahead of any worker, through ``JobQueue.types`` (`jobqueue types`):
declared, listed and removed, each change with its audit row; and what POST /jobs asks
of them, through a cache that costs a request no query once warm.

A declared type is accepted by POST /jobs with no task here and no live worker that
announces it, so that enqueueing does not wait for a worker to be up. With a payload
schema (JSON Schema, any draft jsonschema knows; 2020-12 when it names none) each
payload of the type is checked against it; without one, any JSON object is accepted.
jsonschema is imported only to check a schema, so a worker never loads it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import asyncpg

from jobqueue import audit
from jobqueue.audit import Actor
from jobqueue.db.store import Store
from jobqueue.model.job_types import DeclaredType

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# How stale an API process's view of the declared types may be: a type declared,
# changed or removed is seen by every process within this. Longer saves a query a
# second; shorter makes a new declaration count sooner after a refused request.
REFRESH_SECONDS = 1.0
# A payload's problems reported at most: a schema that fails every item of a long
# array would otherwise answer with thousands.
MAX_PROBLEMS = 20


class SchemaError(ValueError):
    """A payload schema that is not a JSON Schema; the message is one line."""


class Checker:
    """A declared type as POST /jobs checks it."""

    def __init__(self, declared: DeclaredType) -> None:
        self.declared = declared
        self._validator: Validator | None = None

    def problems(self, payload: Any) -> list[tuple[list[str | int], str]]:
        """Where ``payload`` breaks the type's schema, and how: (path in the payload,
        message), at most MAX_PROBLEMS; none without a schema."""
        if self.declared.payload_schema is None:
            return []
        if self._validator is None:
            self._validator = validator(self.declared.payload_schema)
        errors = sorted(self._validator.iter_errors(payload), key=lambda e: list(e.path))
        return [(list(e.absolute_path), e.message) for e in errors[:MAX_PROBLEMS]]


def validator(schema: dict[str, Any]) -> Validator:
    """The validator of ``schema``'s draft; SchemaError when it is not a schema."""
    import jsonschema.validators
    from jsonschema.exceptions import SchemaError as Invalid

    if not isinstance(schema, dict):
        raise SchemaError("a payload schema must be a JSON object")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except Invalid as exc:
        where = "/".join(str(p) for p in exc.path)
        at = f" at {where}" if where else ""
        raise SchemaError(f"not a JSON Schema{at}: {exc.message}") from None
    return cls(schema)


class DeclaredTypes:
    def __init__(self, store: Callable[[], Awaitable[Store]]) -> None:
        self._store = store
        self._checkers: dict[str, Checker] = {}
        self._loaded_at = -REFRESH_SECONDS

    async def declare(
        self, name: str, *, payload_schema: dict[str, Any] | None, by: Actor
    ) -> tuple[DeclaredType, bool]:
        """``name`` declared, or its schema replaced (None: any payload); and whether
        it is new. SchemaError for a schema that is not one, before anything is stored."""
        if payload_schema is not None:
            validator(payload_schema)
        async with (await self._store()).transaction() as tx:
            declared, created = await tx.job_type_put(name=name, payload_schema=payload_schema)
            await audit.record_as(tx, by, audit.Action.TYPE_DECLARE, target=name)
        self._loaded_at = -REFRESH_SECONDS
        return declared, created

    async def remove(self, name: str, *, by: Actor) -> DeclaredType | None:
        """The type forgotten, or None when none was declared with the name."""
        async with (await self._store()).transaction() as tx:
            removed = await tx.job_type_remove(name=name)
            await audit.record_as(
                tx, by, audit.Action.TYPE_REMOVE, target=name,
                result=audit.OK if removed is not None else audit.NOT_FOUND,
            )  # fmt: skip
        self._loaded_at = -REFRESH_SECONDS
        return removed

    async def list(self) -> list[DeclaredType]:
        return await (await self._store()).job_types_list()

    async def checkers(self, names: Iterable[str]) -> dict[str, Checker]:
        """The declared types among ``names``, as of at most REFRESH_SECONDS ago."""
        if time.monotonic() - self._loaded_at >= REFRESH_SECONDS:
            await self._refresh()
        checkers = self._checkers
        if not checkers:  # none declared: what most requests find
            return {}
        return {name: checkers[name] for name in names if name in checkers}

    async def _refresh(self) -> None:
        try:
            declared = await self.list()
        except (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError):
            declared = []  # a schema from before declared types: none are
        kept = self._checkers
        # A type whose schema is unchanged keeps its compiled validator.
        self._checkers = {
            d.name: kept[d.name] if d.name in kept and kept[d.name].declared == d else Checker(d)
            for d in declared
        }
        self._loaded_at = time.monotonic()
