"""A DATABASE_URL that lists several hosts: how it is split into one DSN per host, and
the settings that refuse one the queue could not work on."""

from __future__ import annotations

import os

import pytest

from jobqueue import config
from jobqueue.config import ConfigError
from jobqueue.db.hosts import single_host_dsns
from tests.conftest import jobqueue


def test_each_host_of_the_address_gets_the_rest_of_the_dsn() -> None:
    dsn = "postgresql://app:s3cret@db1:5432,db2:5433/jobs?target_session_attrs=read-write"
    assert single_host_dsns(dsn) == [
        "postgresql://app:s3cret@db1:5432/jobs?target_session_attrs=read-write",
        "postgresql://app:s3cret@db2:5433/jobs?target_session_attrs=read-write",
    ]


def test_hosts_given_as_parameters_are_split_with_their_ports() -> None:
    dsn = "postgresql:///jobs?host=db1,db2&port=5432,5433&target_session_attrs=primary"
    assert single_host_dsns(dsn) == [
        "postgresql:///jobs?target_session_attrs=primary&host=db1&port=5432",
        "postgresql:///jobs?target_session_attrs=primary&host=db2&port=5433",
    ]


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://postgres@127.0.0.1:5432/postgres",
        "postgresql://[::1]:5432/jobs",
        # asyncpg reads ?host= only when the address names no host.
        "postgresql://db1/jobs?host=db2,db3",
    ],
)
def test_a_dsn_of_one_host_is_used_as_it_is(dsn: str) -> None:
    assert single_host_dsns(dsn) == [dsn]


@pytest.mark.parametrize("setting", ["DATABASE_URL", "JOBQUEUE_DIRECT_DATABASE_URL"])
def test_several_hosts_are_accepted_with_a_target_that_can_write(setting: str) -> None:
    for target in ("read-write", "primary", "any"):
        dsn = f"postgresql://db1,db2/jobs?target_session_attrs={target}"
        settings = config.load(environ={setting: dsn})
        assert dsn in (settings.database_url, settings.direct_database_url)


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        (
            "postgresql://db1,db2/jobs",
            "DATABASE_URL: it lists 2 hosts but no target_session_attrs: add "
            "?target_session_attrs=read-write",
        ),
        (
            "postgresql://db1,db2/jobs?target_session_attrs=prefer-standby",
            "DATABASE_URL: target_session_attrs=prefer-standby would connect to servers "
            "that cannot store jobs",
        ),
        (
            "postgresql://db1/jobs?target_session_attrs=read-only",
            "DATABASE_URL: target_session_attrs=read-only would connect",
        ),
    ],
)
def test_a_dsn_that_could_reach_a_standby_is_refused_in_one_line(dsn: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config.load(environ={"DATABASE_URL": dsn})
    assert str(raised.value).startswith(message)
    with pytest.raises(ConfigError) as raised:
        config.load(environ={"JOBQUEUE_DIRECT_DATABASE_URL": dsn})
    assert str(raised.value).startswith(
        message.replace("DATABASE_URL", "JOBQUEUE_DIRECT_DATABASE_URL")
    )
    assert "docs/failover.md" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_command_line_refuses_such_a_dsn_in_one_line_on_stderr() -> None:
    env = {**os.environ, "DATABASE_URL": "postgresql://db1,db2/jobs"}
    done = jobqueue(env, "worker")
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1, done.stderr
    assert "DATABASE_URL: it lists 2 hosts but no target_session_attrs" in done.stderr
