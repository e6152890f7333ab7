"""What `jobqueue grants` prints for each role, from the table of privileges."""

from __future__ import annotations

import re

import pytest

from jobqueue.db import grants

TABLES = {"jobs", "job_attempts", "job_logs", "workers", "leader", "queues", "queue_totals",
          "queue_count_changes", "unique_keys", "jobqueue_migrations"}  # fmt: skip


def granted_tables(lines: list[str]) -> set[str]:
    return {m[1] for line in lines if (m := re.match(r'GRANT .* ON "s"\.(\w+) TO', line))}


def test_the_enqueue_role_gets_jobs_only_and_a_policy_of_its_own() -> None:
    lines = grants.statements("s", "app", "enqueue", TABLES)
    assert granted_tables(lines) == {"jobs"}
    assert 'GRANT USAGE ON SCHEMA "s" TO "app";' in lines
    assert any(line.startswith('CREATE POLICY "app" ON "s".jobs AS RESTRICTIVE') for line in lines)
    assert not any("UPDATE" in line or "DELETE" in line for line in lines if "GRANT" in line)


def test_tables_not_migrated_yet_are_named_in_comments_not_granted() -> None:
    lines = grants.statements("s", "web", "api", TABLES)
    assert granted_tables(lines) == TABLES & set(grants.TABLE_PRIVILEGES["api"])
    for table in ("api_tokens", "audit_log", "idempotency_keys"):
        assert f"-- {table}: not in the schema yet; run grants again after migrating" in lines
    with_tokens = grants.statements("s", "web", "api", TABLES | {"api_tokens"})
    assert 'GRANT SELECT, INSERT, UPDATE ON "s".api_tokens TO "web";' in with_tokens


def test_no_role_gets_ddl_or_writes_the_migrations_table() -> None:
    for purpose in grants.PURPOSES:
        text = "\n".join(grants.statements("s", "r", purpose, TABLES))
        # Read only, by the roles whose processes check the schema when they start
        # without migrating (docs/migrations.md).
        migrations = [line for line in text.splitlines() if "jobqueue_migrations" in line]
        expected = (
            [] if purpose == "enqueue" else ['GRANT SELECT ON "s".jobqueue_migrations TO "r";']
        )
        assert migrations == expected
        assert not re.search(r"\b(CREATE|TRUNCATE|REFERENCES|TRIGGER|ALL)\b(?! POLICY)", text)


@pytest.mark.parametrize("role", ["", "a b", "x-y", "é", "1a", "a" * 64])
def test_role_names_are_plain_identifiers(role: str) -> None:
    with pytest.raises(ValueError, match="--role must be a role name"):
        grants.statements("s", role, "worker", TABLES)
