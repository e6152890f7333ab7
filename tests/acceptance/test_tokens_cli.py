"""`jobqueue tokens`: a secret shown once and stored only as a hash, listed never,
revoked by name; bad input is one line and exit 2."""

from __future__ import annotations

import getpass
import json

import asyncpg
import pytest

from jobqueue.auth.tokens import digest
from tests.conftest import jobqueue

pytestmark = pytest.mark.anyio


async def test_create_list_and_revoke(
    env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    made = jobqueue(
        env, "tokens", "create", "--name", "mailer", "--scope", "jobs:enqueue",
        "--scope", "jobs:read", "--queue", "mail", "--expires", "30d", "--json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert set(created) == {"name", "secret"}
    secret = created["secret"]
    assert secret.startswith("jqt_")
    assert len(secret) > 50

    human = jobqueue(env, "tokens", "create", "--name", "ops", "--scope", "admin")
    assert human.returncode == 0, human.stderr
    assert "shown this once" in human.stdout
    ops_secret = human.stdout.split("shown this once:")[1].split()[0]

    stored = await db.fetch(f'SELECT name, secret_hash FROM "{schema}".api_tokens ORDER BY name')
    assert [r["name"] for r in stored] == ["mailer", "ops"]
    assert bytes(stored[0]["secret_hash"]) == digest(secret.split("_", 2)[2])
    everything = " ".join(str(dict(r.items())) for r in stored)
    assert secret.split("_", 2)[2] not in everything

    listing = jobqueue(env, "tokens", "list")
    assert listing.returncode == 0
    assert secret not in listing.stdout
    assert ops_secret not in listing.stdout
    rows = [line.split() for line in listing.stdout.splitlines()]
    assert rows[0] == ["NAME", "SCOPES", "QUEUES", "TYPES", "CREATED", "EXPIRES", "STATE"]
    assert rows[1][:4] == ["mailer", "jobs:enqueue,jobs:read", "mail", "*"]
    assert rows[1][-1] == "active"
    as_json = json.loads(jobqueue(env, "tokens", "list", "--json").stdout)
    assert [t["name"] for t in as_json] == ["mailer", "ops"]
    assert all("secret" not in t and "secret_hash" not in t for t in as_json)

    revoked = jobqueue(env, "tokens", "revoke", "mailer")
    assert (revoked.returncode, revoked.stdout.strip()) == (0, "Token 'mailer' revoked.")
    states = {
        t["name"]: t["state"] for t in json.loads(jobqueue(env, "tokens", "list", "--json").stdout)
    }
    assert states == {"mailer": "revoked", "ops": "active"}
    # The name is free again once revoked.
    again = jobqueue(env, "tokens", "create", "--name", "mailer", "--scope", "jobs:read")
    assert again.returncode == 0, again.stderr
    assert jobqueue(env, "tokens", "revoke", "nobody").returncode == 2

    audited = await db.fetch(
        f'SELECT actor, action, target, result, client FROM "{schema}".audit_log ORDER BY id'
    )
    assert [tuple(r.values())[1:] for r in audited] == [
        ("token.create", "mailer", "ok", None),
        ("token.create", "ops", "ok", None),
        ("token.revoke", "mailer", "ok", None),
        ("token.create", "mailer", "ok", None),
        ("token.revoke", "nobody", "not_found", None),
    ]
    assert {r["actor"] for r in audited} == {f"cli:{getpass.getuser()}"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create", "--name", "x", "--scope", "jobs:write"], "unknown scope 'jobs:write'"),
        (["create", "--name", "has space", "--scope", "admin"], "token name 'has space'"),
        (["create", "--name", "x", "--scope", "admin", "--expires", "soon"], "--expires must be"),
        (["create", "--name", "x", "--scope", "admin", "--queue", ""], "--queue needs"),
        (["create", "--name", "x", "--scope", "admin", "--queue", "a b"], "--queue: a queue"),
        (["create", "--name", "x", "--scope", "admin", "--type", " "], "--type: must be"),
        (["revoke", "nobody"], "no unrevoked token is named 'nobody'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    env: dict[str, str], args: list[str], message: str
) -> None:
    done = jobqueue(env, "tokens", *args)
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert message in done.stderr


def test_a_second_token_of_one_name_is_refused(env: dict[str, str]) -> None:
    assert jobqueue(env, "tokens", "create", "--name", "ci", "--scope", "admin").returncode == 0
    twice = jobqueue(env, "tokens", "create", "--name", "ci", "--scope", "admin")
    assert twice.returncode == 2
    assert twice.stderr.strip() == "jobqueue: error: a token named 'ci' exists; revoke it first"
