"""Setting a queue's limits: in one transaction with its audit row."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobqueue import audit
from jobqueue.audit import Action, Actor
from jobqueue.db.store import Store
from jobqueue.limits.model import changes_from, parse_entries


async def declare(store: Store, entries: str) -> None:
    """Write the limits JOBQUEUE_LIMITS declares (already checked by config)."""
    for queue, given in parse_entries(entries).items():
        await set_limits(store, queue, given)


async def set_limits(
    store: Store, name: str, given: Mapping[str, Any], *, by: Actor | None = None
) -> None:
    """Set the limits ``given`` names (None removes one) on queue ``name``, whether or
    not it has jobs; ValueError naming the field if one is wrong (nothing is stored)."""
    changes = changes_from(given)
    async with store.transaction() as tx:
        await tx.queue_limits_set(name=name, columns=json.dumps(changes.columns()))
        if by is not None:
            await audit.record_as(
                tx, by, Action.QUEUE_LIMITS, target=name, filter=changes.as_json()
            )
