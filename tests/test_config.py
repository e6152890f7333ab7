"""Settings: defaults, flags over environment, one-line errors, and the README's table."""

from __future__ import annotations

import pytest

from jobqueue import config
from jobqueue.config import ConfigError, Settings
from tests.conftest import ROOT


def test_defaults_are_the_seeds() -> None:
    s = config.load(environ={})
    assert (s.port, s.worker_count, s.max_attempts, s.poll_interval) == (5001, 5, 3, 1.0)
    assert (s.database_url, s.host, s.retry_delay, s.shutdown_timeout) == (
        None,
        "127.0.0.1",
        10.0,
        30.0,
    )


def test_a_flag_wins_over_the_environment() -> None:
    s = config.load(environ={"WORKER_COUNT": "7", "PORT": "6000"}, flags={"worker_count": "9"})
    assert (s.worker_count, s.port) == (9, 6000)


def test_fractional_retry_delay_and_queue_list() -> None:
    s = config.load(environ={"RETRY_DELAY_SECONDS": "0.25", "JOBQUEUE_QUEUES": "a, b"})
    assert (s.retry_delay, s.queues) == (0.25, ("a", "b"))


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("WORKER_COUNT", "abc", "WORKER_COUNT must be a positive integer, got 'abc'"),
        ("MAX_ATTEMPTS", "0", "MAX_ATTEMPTS must be a positive integer, got '0'"),
        ("PORT", "70000", "PORT must be a port number from 0 to 65535, got '70000'"),
        ("POLL_INTERVAL_SECONDS", "0", "POLL_INTERVAL_SECONDS must be a positive number"),
        ("JOBQUEUE_SHUTDOWN_TIMEOUT", "nan", "JOBQUEUE_SHUTDOWN_TIMEOUT must be a number"),
        ("JOBQUEUE_QUEUES", "a b", "JOBQUEUE_QUEUES must be a comma-separated list"),
        ("JOBQUEUE_LOG_FORMAT", "xml", "JOBQUEUE_LOG_FORMAT must be one of console, json"),
    ],
)
def test_a_bad_value_names_the_setting(env: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config.load(environ={env: value})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_readme_documents_every_setting_with_its_flag_and_default() -> None:
    readme = (ROOT / "README.md").read_text()
    for f in config.env_settings():
        row = next(
            (line for line in readme.splitlines() if line.startswith(f"| `{f.metadata['env']}` |")),
            None,
        )
        assert row is not None, f"{f.metadata['env']} is missing from the README's table"
        assert f"`{config.flag_name(f)}`" in row
        default = f.default
        shown = (
            "unset"
            if default is None
            else ",".join(default)
            if isinstance(default, tuple)
            else (f"{default:g}" if isinstance(default, float) else str(default))
        )
        assert shown in row, (row, shown)
    assert Settings().migrate is True


def test_worker_processes_inherit_every_setting_none_included() -> None:
    """`--processes` passes the settings on as variables: a None that is not the default
    (retention `forever`) must come back as None, not as the default."""
    from jobqueue.supervisor import child_environment

    settings = config.load(
        {"JOBQUEUE_RETAIN_COMPLETED": "forever", "JOBQUEUE_QUEUES": "mail=3,default"}
    )
    env = child_environment(settings, "postgresql://x")
    again = config.load(env)
    assert again.retain_completed is None
    assert again.job_timeout is None
    assert again.queues == ("mail=3", "default")
    assert again.retain_failed == settings.retain_failed
