"""db/schema.sql is the schema the migrations make: a migration added without
running scripts/schema-sql, or the file edited by hand, fails here."""

from __future__ import annotations

import difflib

from jobqueue.db.schema_dump import SCHEMA_FILE, current_schema


def test_schema_sql_is_what_the_migrations_make() -> None:
    made = current_schema()
    kept = SCHEMA_FILE.read_text()
    diff = "".join(
        difflib.unified_diff(
            kept.splitlines(keepends=True), made.splitlines(keepends=True),
            "db/schema.sql", "the migrations", n=1,
        )
    )  # fmt: skip
    assert made == kept, f"run scripts/schema-sql:\n{diff[:4000]}"
