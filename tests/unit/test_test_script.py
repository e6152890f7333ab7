"""scripts/test, the README's test command: on a machine without the programs the
suite needs, and without the means to install them, it says in one line what to do
before any test runs; given a part of the suite, it runs that part anyway."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "test"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """scripts/test with a PATH holding bash and this Python only: no promtool, and no
    apt-get to install it with (even as root)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python3"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    bash = shutil.which("bash")
    assert bash is not None
    env = {**os.environ, "PATH": str(bin_dir)}
    return subprocess.run(
        [bash, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_suite_stops_at_once_saying_what_to_install(tmp_path: Path) -> None:
    done = run(tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""  # no test ran
    [line] = done.stderr.splitlines()
    assert "Debian's prometheus" in line
    assert "sudo apt-get install --no-install-recommends " in line


def test_a_part_of_the_suite_runs_with_a_warning(tmp_path: Path) -> None:
    done = run(tmp_path, "--collect-only", "-q", "tests/unit/test_config.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tests/unit/test_config.py::test_defaults_are_the_seeds" in done.stdout
    assert done.stderr.startswith("scripts/test: not installed: prometheus")
