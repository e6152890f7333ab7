"""Schemathesis against a real `jobqueue api`, over HTTP: every operation of its
/openapi.json, with the schema's examples, the coverage of each constraint's edges
(and just past them) and random fuzzing. Every answer must be no 500, a status code
the operation declares, and a body that matches the schema declared for that code.

Bounded: 50 cases per operation in the examples and coverage phases; fuzzing repeats
its 50 until a 90 s budget is spent, from a fixed seed on one worker, so a run replays
the same cases in the same order and a faster machine only goes further along them.
(Without the budget, one pass of 50 takes 25 s and finds less.) Settings it cannot
take as flags are in schemathesis.toml beside this file."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Spawn

pytestmark = pytest.mark.fuzz

CONFIG = Path(__file__).with_name("schemathesis.toml")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
PHASES = "examples,coverage,fuzzing"
CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance"
BUDGET_SECONDS = 90


def test_every_operation_answers_as_its_openapi_schema_says(
    spawn: Spawn, env: dict[str, str], tmp_path: Path
) -> None:
    token = secrets.token_urlsafe(32)
    # The token the API honours once it checks tokens; until then it is sent and ignored.
    # Its cases without the header are failures: past the default 20 a minute, every
    # answer would be a 429, and the routes behind it untested.
    env.update(JOBQUEUE_ADMIN_TOKEN=token, JOBQUEUE_AUTH_MAX_FAILURES="1000000")
    api = spawn(["api"], env, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    hooks_env = {
        **env,
        "SCHEMATHESIS_HOOKS": HOOKS.stem,
        "PYTHONPATH": f"{HOOKS.parent}{os.pathsep}{env.get('PYTHONPATH', '')}",
    }
    run = spawn(
        [
            "--config-file", str(CONFIG),
            "run", f"{base}/openapi.json",
            "--phases", PHASES,
            "--checks", CHECKS,
            "--max-examples", "50",
            "--seed", "1",
            "--max-time", str(BUDGET_SECONDS),
            # One worker: the order of the cases, and so what each finds, is the seed's.
            "--workers", "1",
            "--request-timeout", "10",
            "--header", f"Authorization: Bearer {token}",
            "--no-color",
        ],
        hooks_env,
        name="schemathesis",
        module="schemathesis.cli",
        cwd=tmp_path,  # its .hypothesis/ database stays out of the checkout
    )  # fmt: skip
    try:
        code = run.popen.wait(BUDGET_SECONDS + 60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"schemathesis overran its budget:\n{run.output}") from None
    # Non-zero for a failed check or an error; its warnings (such as most of POST /jobs's
    # random bodies being refused) are printed, not failures.
    assert code == 0, run.output
    for phase in ("Examples", "Coverage", "Fuzzing"):
        assert f"✅ {phase}" in run.output, run.output
