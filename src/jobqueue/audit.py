"""The audit log: who retried, cancelled, paused, resumed or changed tokens, when, from
where, on what, and with what result. See docs/audit.md.

A row is written by :func:`record` on the store of the action's own transaction, so
that an action and its row commit together: no action is done without its row, and
a row that cannot be written undoes its action, which then answers as the failure
it is (503) instead of a success that was never recorded.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobqueue.model.audit import NOT_FOUND, OK, Action, AuditEntry, conflict

if TYPE_CHECKING:
    from jobqueue.db.store import Store
    from jobqueue.model.tokens import Principal

__all__ = ["NOT_FOUND", "OK", "Action", "Actor", "AuditEntry", "conflict", "record", "record_as"]


@dataclasses.dataclass(frozen=True)
class Actor:
    """Who acts: a token's name (``anonymous`` while the API is open) and the HTTP
    client's address, or ``cli:<OS user>`` with no address for the command line."""

    name: str
    client: str | None = None

    @classmethod
    def of(cls, principal: Principal) -> Actor:
        return cls(principal.actor, principal.client)

    @classmethod
    def cli(cls) -> Actor:
        return cls(f"cli:{os_user()}")


def os_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name, no passwd entry (a bare container)
        return str(os.getuid())


async def record(
    store: Store,
    *,
    actor: str,
    action: Action | str,
    target: str | int | None = None,
    filter: Mapping[str, Any] | None = None,
    count: int | None = None,
    client: str | None = None,
    result: str = OK,
) -> int:
    """Write one row; return its id. ``store`` should run on the action's transaction
    (``store.on(conn)`` inside ``conn.transaction()``, or ``store.transaction()``)."""
    return await store.audit_insert(
        actor=actor,
        action=str(action),
        target=None if target is None else str(target),
        filter=None if filter is None else json.dumps(filter, sort_keys=True, default=str),
        count=count,
        client=client,
        result=result,
    )


async def record_as(store: Store, by: Actor, action: Action, **fields: Any) -> int:
    """:func:`record` for ``by``: its name and its client's address."""
    return await record(store, actor=by.name, client=by.client, action=action, **fields)
