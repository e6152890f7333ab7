"""API tokens listed, created and revoked, each change with its audit row in the same
transaction: what `jobqueue tokens` and `/tokens` both do, through
``JobQueue.tokens``. A refused change (a name taken, no such token) is recorded too."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

import asyncpg

from jobqueue import audit
from jobqueue.audit import Actor
from jobqueue.db.store import Store
from jobqueue.model.tokens import StoredToken, TokenInfo


class TokenAdmin:
    def __init__(self, store: Callable[[], Awaitable[Store]]) -> None:
        self._store = store

    async def list(self) -> tuple[datetime, list[TokenInfo]]:
        """Every token, revoked and expired ones too, and the database's now, which
        says which have expired."""
        store = await self._store()
        return await store.clock_now(), [t.info() for t in await store.tokens_list()]

    async def any_active(self) -> bool:
        """Whether an unrevoked, unexpired token exists; False on a schema not migrated
        yet, which holds none."""
        try:
            return await (await self._store()).tokens_active_exist()
        except (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError):
            return False

    async def create(
        self, token: StoredToken, *, expires_in_seconds: float | None, by: Actor
    ) -> TokenInfo | None:
        """``token`` stored, or None when an unrevoked token has its name."""
        async with (await self._store()).transaction() as tx:
            info = await tx.token_create(token=token, expires_in_seconds=expires_in_seconds)
            await audit.record_as(
                tx, by, audit.Action.TOKEN_CREATE, target=token.name,
                result=audit.OK if info is not None else audit.conflict("exists"),
            )  # fmt: skip
        return info

    async def revoke(self, name: str, *, by: Actor) -> TokenInfo | None:
        """The token revoked, or None when no unrevoked token has the name."""
        async with (await self._store()).transaction() as tx:
            info = await tx.token_revoke(name=name)
            await audit.record_as(
                tx, by, audit.Action.TOKEN_REVOKE, target=name,
                result=audit.OK if info is not None else audit.NOT_FOUND,
            )  # fmt: skip
        return info
