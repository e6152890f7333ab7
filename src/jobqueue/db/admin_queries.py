"""The store's queries of the audit log, the schema and its migrations, API tokens and
declared job types.
Part of the Store (db/store.py), which inherits it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jobqueue.db.query_base import QueryBase, _count, _or_none
from jobqueue.model.audit import AuditEntry
from jobqueue.model.job_types import DeclaredType
from jobqueue.model.tokens import StoredToken, TokenInfo


class AdminQueries(QueryBase):
    # -- the audit log ------------------------------------------------------------------

    async def audit_count(self, *, entry_id: int, add: int) -> None:
        """Add ``add`` jobs to the count of a bulk action's row."""
        await self.db.execute(self._q.audit_count, entry_id, add)

    async def audit_expire(self, *, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` rows older than ``older_than_seconds``; return how many."""
        status = await self.db.execute(
            self._q.audit_expire, older_than_seconds, limit, self.clock.now()
        )
        return _count(status)

    async def audit_insert(
        self,
        *,
        actor: str,
        action: str,
        target: str | None,
        filter: str | None,
        count: int | None,
        client: str | None,
        result: str,
    ) -> int:
        """One row (``filter``: JSON text); its id."""
        entry_id: int = await self.db.fetchval(
            self._q.audit_insert, actor, action, target, filter, count, client, result,
            self.clock.now(),
        )  # fmt: skip
        return entry_id

    async def audit_list(
        self, *, actor: str | None, action: str | None, before_id: int | None, limit: int
    ) -> list[AuditEntry]:
        """Newest first; ``before_id`` pages on from the last id of the page before."""
        records = await self.db.fetch(self._q.audit_list, actor, action, before_id, limit)
        return [AuditEntry.from_record(r) for r in records]

    # -- the schema and its migrations ----------------------------------------------------

    async def ping(self) -> None:
        await self.db.execute(self._q.ping)

    async def migration_lock(self, *, key: int) -> None:
        """Wait for the lock ``key``, held until this transaction ends."""
        await self.db.execute(self._q.migration_lock, key)

    async def migration_lock_timeout(self, *, seconds: float) -> None:
        """Give up a lock wait of this transaction after ``seconds``."""
        await self.db.execute(self._q.migration_lock_timeout, f"{round(seconds * 1000)}ms")

    async def migration_session_lock(self, *, key: int) -> bool:
        """Take the lock ``key`` for this session if it is free; False if it is not."""
        return bool(await self.db.fetchval(self._q.migration_session_lock, key))

    async def migration_session_unlock(self, *, key: int) -> bool:
        """Release the session's lock ``key``; False if it held none."""
        return bool(await self.db.fetchval(self._q.migration_session_unlock, key))

    async def migration_invalid_index_drops(self) -> list[str]:
        """A statement dropping each of the schema's invalid indexes (what a concurrent
        build that died leaves), for a migration outside a transaction to run."""
        rows = await self.db.fetch(self._q.migration_invalid_index_drops, self.schema)
        return [r["statement"] for r in rows]

    # -- API tokens ----------------------------------------------------------------------

    async def token_create(
        self, *, token: StoredToken, expires_in_seconds: float | None
    ) -> TokenInfo | None:
        """Store ``token``; None when an unrevoked token already has its name."""
        record = await self.db.fetchrow(
            self._q.token_create, token.key_id, token.name, token.secret_hash,
            list(token.scopes), _or_none(token.queues), _or_none(token.types),
            self.clock.now(), expires_in_seconds,
        )  # fmt: skip
        return None if record is None else TokenInfo.from_record(record)

    async def token_revoke(self, *, name: str) -> TokenInfo | None:
        record = await self.db.fetchrow(self._q.token_revoke, name, self.clock.now())
        return None if record is None else TokenInfo.from_record(record)

    async def tokens_list(self) -> list[StoredToken]:
        return [StoredToken.from_record(r) for r in await self.db.fetch(self._q.tokens_list)]

    async def tokens_active_exist(self) -> bool:
        """Whether an unrevoked, unexpired token exists; raises UndefinedTableError on a
        schema not migrated yet."""
        found: bool = await self.db.fetchval(self._q.tokens_active_exist, self.clock.now())
        return found

    async def schema_create(self) -> None:
        await self.db.execute(self._q.schema_create)

    async def migrations_create(self) -> None:
        await self.db.execute(self._q.migrations_create)

    async def migrations_applied(self) -> set[int]:
        return {row["version"] for row in await self.db.fetch(self._q.migrations_applied)}

    async def migrations_list(self) -> list[tuple[int, str, datetime]]:
        """Version, name and time of each applied migration; raises UndefinedTableError
        (or InvalidSchemaNameError) before the first."""
        rows = await self.db.fetch(self._q.migrations_list)
        return [(r["version"], r["name"], r["applied_at"]) for r in rows]

    async def migration_relations(self) -> list[int]:
        """The oids of the schema's relations as they are now."""
        return list(await self.db.fetchval(self._q.migration_relations, self.schema) or [])

    async def migration_locks(self, *, existing: list[int]) -> dict[str, tuple[str, bool]]:
        """The strongest lock held on each relation, and whether it is in ``existing``."""
        rows = await self.db.fetch(self._q.migration_locks, existing)
        return {r["relation"]: (r["mode"], r["existed"]) for r in rows}

    async def migrations_record(self, *, version: int, name: str) -> None:
        await self.db.execute(self._q.migrations_record, version, name)

    async def schema_tables(self) -> set[str]:
        """The names of the schema's tables."""
        return {row["name"] for row in await self.db.fetch(self._q.schema_tables)}

    # -- declared job types --------------------------------------------------------------

    async def job_type_put(
        self, *, name: str, payload_schema: dict[str, Any] | None
    ) -> tuple[DeclaredType, bool]:
        """``name`` declared, or its schema replaced; and whether it is new."""
        schema = None if payload_schema is None else json.dumps(payload_schema)
        record = await self.db.fetchrow(self._q.job_type_put, name, schema)
        return _declared(record), bool(record["created"])

    async def job_type_remove(self, *, name: str) -> DeclaredType | None:
        record = await self.db.fetchrow(self._q.job_type_remove, name)
        return None if record is None else _declared(record)

    async def job_types_list(self) -> list[DeclaredType]:
        return [_declared(r) for r in await self.db.fetch(self._q.job_types_list)]


def _declared(record: Any) -> DeclaredType:
    schema = record["payload_schema"]
    return DeclaredType(
        name=record["name"],
        payload_schema=None if schema is None else json.loads(schema),
        created_at=record["created_at"],
        updated_at=record["updated_at"],
    )
