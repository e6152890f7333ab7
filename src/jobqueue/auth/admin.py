"""Creating and revoking API tokens, each with its audit row in the same transaction:
what `jobqueue tokens` and `/tokens` both do. A refused change (a name taken, no such
token) is recorded too."""

from __future__ import annotations

from jobqueue import audit
from jobqueue.audit import Actor
from jobqueue.db.store import Store
from jobqueue.model.tokens import StoredToken, TokenInfo


async def create(
    store: Store, token: StoredToken, *, expires_in_seconds: float | None, by: Actor
) -> TokenInfo | None:
    """``token`` stored, or None when an unrevoked token has its name."""
    async with store.transaction() as tx:
        info = await tx.token_create(token=token, expires_in_seconds=expires_in_seconds)
        await audit.record_as(
            tx, by, audit.Action.TOKEN_CREATE, target=token.name,
            result=audit.OK if info is not None else audit.conflict("exists"),
        )  # fmt: skip
    return info


async def revoke(store: Store, name: str, *, by: Actor) -> TokenInfo | None:
    """The token revoked, or None when no unrevoked token has the name."""
    async with store.transaction() as tx:
        info = await tx.token_revoke(name=name)
        await audit.record_as(
            tx, by, audit.Action.TOKEN_REVOKE, target=name,
            result=audit.OK if info is not None else audit.NOT_FOUND,
        )  # fmt: skip
    return info
