"""Settings: defaults, flags over environment, one-line errors, the docs' table, and the
parsers of queue lists and durations."""

from __future__ import annotations

import re

import pytest

from jobqueue import config
from jobqueue.config import ConfigError, Settings
from jobqueue.settings_docs import markdown_table, with_table
from jobqueue.settings_parsing import queue_limits, queue_list, retention
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


def test_the_trace_url_is_a_template_of_the_trace_id() -> None:
    s = config.load(environ={"JOBQUEUE_TRACE_URL": "https://tracing.example/trace/{trace_id}"})
    assert s.trace_url == "https://tracing.example/trace/{trace_id}"
    assert config.load(environ={}).trace_url is None


def test_the_trusted_proxies_are_addresses_and_networks() -> None:
    s = config.load(environ={"JOBQUEUE_TRUSTED_PROXIES": "10.0.0.5, 192.168.0.0/16,::1"})
    assert s.trusted_proxies == ("10.0.0.5", "192.168.0.0/16", "::1")
    assert config.load(environ={"JOBQUEUE_TRUSTED_PROXIES": " "}).trusted_proxies is None
    assert config.load(environ={}).trusted_proxies is None


def test_claim_any_type_is_off_unless_switched_on_by_flag_or_variable() -> None:
    from jobqueue.cli import build_parser
    from jobqueue.cli.common import settings_from

    assert config.load(environ={}).claim_any_type is False
    assert config.load(environ={"JOBQUEUE_CLAIM_ANY_TYPE": "true"}).claim_any_type is True
    assert config.load(environ={"JOBQUEUE_CLAIM_ANY_TYPE": "0"}).claim_any_type is False
    parser = build_parser()
    assert settings_from(parser.parse_args(["worker"])).claim_any_type is False
    flagged = parser.parse_args(["worker", "--claim-any-type"])  # a switch, no value
    assert settings_from(flagged).claim_any_type is True


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
        ("JOBQUEUE_TRACING", "yes", "JOBQUEUE_TRACING must be one of auto, on, off, got 'yes'"),
        ("JOBQUEUE_CLAIM_ANY_TYPE", "maybe", "JOBQUEUE_CLAIM_ANY_TYPE must be true or false"),
        (
            "JOBQUEUE_TRUSTED_PROXIES",
            "10.0.0.5,proxy.local",
            "JOBQUEUE_TRUSTED_PROXIES must be a comma-separated list of IP addresses and "
            "networks (e.g. 10.0.0.5,192.168.0.0/16); 'proxy.local' is neither",
        ),
        (  # host bits set: uvicorn would read it as a name, which no client address is
            "JOBQUEUE_TRUSTED_PROXIES",
            "10.0.0.5/8",
            "'10.0.0.5/8' is neither",
        ),
        (
            "JOBQUEUE_TRACE_URL",
            "https://t.example/",
            "JOBQUEUE_TRACE_URL must be an http(s) URL holding {trace_id}",
        ),
        (
            "JOBQUEUE_TRACE_URL",
            "javascript:{trace_id}",
            "JOBQUEUE_TRACE_URL must be an http(s) URL",
        ),
    ],
)
def test_a_bad_value_names_the_setting(env: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config.load(environ={env: value})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_docs_table_is_the_settings() -> None:
    """docs/configuration.md's table is what scripts/settings-table makes of the settings:
    a setting added (or changed) without rerunning it fails here, and so does an edit of
    the table by hand."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert with_table(page) == page, (
        "docs/configuration.md's settings table is not the settings': run scripts/settings-table"
    )
    assert "`--no-migrate`" in page
    assert Settings().migrate is True


# Set by the `--processes` supervisor for its children, never by people.
INTERNAL_VARIABLES = {"JOBQUEUE_WAKEUPS_RELAYED"}


def test_every_variable_the_code_names_is_in_the_table() -> None:
    """A variable read outside Settings (as the bootstrap token is) has its row too."""
    rows = set(re.findall(r"^\| `([A-Z_]+)` \|", markdown_table(), re.MULTILINE))
    named = {
        name
        for path in (ROOT / "src" / "jobqueue").rglob("*.py")
        for name in re.findall(r"[\"'](JOBQUEUE_[A-Z_]+)[\"']", path.read_text())
    }
    assert {"JOBQUEUE_ADMIN_TOKEN", "JOBQUEUE_ADMIN_TOKEN_FILE"} <= named
    assert named - INTERNAL_VARIABLES - rows == set()


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


def test_queue_limits_are_parsed_or_refused_in_one_line() -> None:
    assert queue_limits(queue_list("Q", "mail=10, reports=2,default")) == {
        "mail": 10,
        "reports": 2,
        "default": None,
    }
    for bad in ("mail=0", "mail=x", "no spaces=1", ""):
        with pytest.raises(ConfigError, match=r"e\.g\. mail=10,default"):
            queue_list("JOBQUEUE_QUEUES", bad)


def test_retention_settings_take_durations() -> None:
    assert retention("R", "86400") == 86400
    assert retention("R", "90m") == 5400
    assert retention("R", "7d") == 7 * 86400
    assert retention("R", "forever") is None
    with pytest.raises(ConfigError, match="R must be a duration such as 86400, 90m, 24h or 7d"):
        retention("R", "soon")
    with pytest.raises(ConfigError):
        retention("R", "-1h")


def test_the_audit_log_is_kept_90_days_unless_told() -> None:
    assert config.load({}).retain_audit == 90 * 86400
    assert config.load({"JOBQUEUE_RETAIN_AUDIT": "365d"}).retain_audit == 365 * 86400
    assert config.load({"JOBQUEUE_RETAIN_AUDIT": "forever"}).retain_audit is None
    with pytest.raises(ConfigError, match="JOBQUEUE_RETAIN_AUDIT must be a duration"):
        config.load({"JOBQUEUE_RETAIN_AUDIT": "a while"})


def test_tracing_on_without_opentelemetry_is_a_one_line_error() -> None:
    """`--tracing on` where OpenTelemetry cannot be imported (hidden here) stops start-up."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from jobqueue.cli import main; main(['worker', '--tracing', 'on'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "jobqueue: error: JOBQUEUE_TRACING=on needs OpenTelemetry: pip install 'jobqueue[otel]'"
    ]
