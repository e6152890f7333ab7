"""The Dockerfile and docker-compose.yml, checked without Docker (which these machines
cannot run): every variable the compose file sets is a jobqueue setting whose value
parses, every command it runs is a jobqueue command, and the PgBouncer beside it is in
transaction mode with the session settings jobqueue would otherwise send."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobqueue import config
from jobqueue.cli import build_parser
from jobqueue.db.pool import SESSION_SETTINGS
from tests.conftest import ROOT

# Variables jobqueue reads that are no Settings field (jobqueue.auth.tokens.admin_secret).
OTHER_VARIABLES = {"JOBQUEUE_ADMIN_TOKEN", "JOBQUEUE_ADMIN_TOKEN_FILE"}


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def jobqueue_services() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose()["services"].items()
        if service.get("build") == "."
    }


def substituted(value: str) -> str:
    """``${VAR:-default}`` as compose would expand it with VAR unset."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_the_compose_file_runs_the_api_the_workers_and_migrations() -> None:
    services = jobqueue_services()
    assert {"api", "worker", "migrate"} <= set(services)
    assert {"postgres", "pgbouncer"} <= set(compose()["services"])


@pytest.mark.parametrize("name", sorted(jobqueue_services()))
def test_each_service_runs_a_real_command_with_real_settings(name: str) -> None:
    service = jobqueue_services()[name]
    build_parser().parse_args(service["command"])  # exits 2 on anything unknown
    environment = {k: substituted(str(v)) for k, v in service["environment"].items()}
    known = {f.metadata["env"] for f in config.env_settings()} | OTHER_VARIABLES
    assert set(environment) <= known, set(environment) - known
    config.load(environ={k: v for k, v in environment.items() if k not in OTHER_VARIABLES})


def test_the_api_beyond_loopback_has_a_token() -> None:
    api = jobqueue_services()["api"]
    assert "0.0.0.0" in api["command"]
    assert "JOBQUEUE_ADMIN_TOKEN_FILE" in api["environment"]
    assert "--insecure-no-auth" not in api["command"]


def test_the_image_runs_jobqueue() -> None:
    instructions = [
        line.split(None, 1) for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line and not line.startswith(("#", " "))
    ]  # fmt: skip
    given = {word: rest for word, rest in instructions}
    assert json.loads(given["ENTRYPOINT"]) == ["jobqueue"]
    build_parser().parse_args(json.loads(given["CMD"]))
    assert given["USER"] not in ("root", "0")


def test_pgbouncer_is_in_transaction_mode_with_the_session_settings() -> None:
    ini = (ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini").read_text()
    assert re.search(r"^pool_mode = transaction$", ini, re.M)
    assert re.search(r"^ignore_startup_parameters = extra_float_digits$", ini, re.M)
    query = re.search(r"connect_query='([^']*)'", ini)
    assert query is not None
    set_here = dict(re.findall(r"SET (\w+) = (\w+)", query.group(1)))
    wanted = {k: v for k, v in SESSION_SETTINGS.items() if not k.startswith("tcp_")}
    assert {k: set_here.get(k) for k in wanted} == wanted
    assert "statement_timeout" in set_here
    for service in jobqueue_services().values():
        environment = service["environment"]
        assert "pgbouncer:6432" in environment["DATABASE_URL"]
        assert "postgres:5432" in environment["JOBQUEUE_DIRECT_DATABASE_URL"]


def test_what_the_compose_file_builds_exists() -> None:
    for service in compose()["services"].values():
        if "build" in service:
            assert (ROOT / service["build"] / "Dockerfile").is_file(), service["build"]
    assert Path(ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini").is_file()
