"""A warning when autovacuum cannot reach jobqueue's tables, logged by a new leader.

Every job's row is inserted, updated two or three times and deleted by retention, so
the jobs table is mostly dead rows that only vacuum reclaims. With autovacuum off (on
the server, or for one of the tables) nothing does: the tables and their indexes grow
without bound and claims slow as they step over dead index entries. jobqueue does not
vacuum for the operator (a VACUUM of a large table is a decision about I/O, and some
servers turn autovacuum off on purpose and vacuum on a timetable of their own); it
says so once per process, when the process first leads maintenance.
"""

from __future__ import annotations

from jobqueue.db.store import Store
from jobqueue.logs import get_logger

log = get_logger("jobqueue.maintenance")


class VacuumCheck:
    def __init__(self, store: Store) -> None:
        self._store = store
        self.checked = False

    async def run_once(self) -> str | None:
        """The warning, logged, if autovacuum does not reach every table; None if it
        does or if this process has looked already."""
        if self.checked:
            return None
        server_on, tables_off = await self._store.vacuum_reach()
        self.checked = True
        if server_on and not tables_off:
            return None
        where = (
            "on this server (autovacuum or track_counts)"
            if not server_on
            else f"for {', '.join(tables_off)}"
        )
        warning = (
            f"autovacuum is off {where}: the rows that claims, completions and retention "
            "leave dead are never reclaimed, so jobqueue's tables grow without bound and "
            "claims slow down; turn it on, or VACUUM the schema's tables regularly "
            "(docs/retention.md#vacuum)"
        )
        log.warning(warning, server_autovacuum=server_on, tables_off=tables_off)
        return warning
