"""What `jobqueue --help`, `--version`, each command's --help and `jobqueue settings`
show: what a newcomer types first, answered without a database."""

from __future__ import annotations

import argparse
import re

import pytest

from jobqueue import config
from jobqueue.cli import build_parser, main
from jobqueue.settings_docs import markdown_table


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    code = exited.value.code
    return (code if isinstance(code, int) else 1), capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "--version")
    assert code == 0
    assert re.fullmatch(r"jobqueue \S+\n", out), out


def test_every_command_has_its_text_beside_it(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(capsys, "--help")
    commands = subparsers(build_parser())
    for name in commands.choices:
        assert re.search(rf"^    {name} +\S", out, re.MULTILINE), f"{name}:\n{out}"
    assert re.search(r"^    workflows +list, inspect and cancel workflows$", out, re.MULTILINE)


def test_every_group_calls_its_subcommands_command() -> None:
    groups = subparsers(build_parser()).choices
    seen = []
    for name, parser in groups.items():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                seen.append(name)
                assert action.metavar == "COMMAND", (name, action.metavar)
                assert parser.description, f"`jobqueue {name} --help` has no description"
    assert {"jobs", "queues", "tokens", "workflows"} <= set(seen)


def test_the_services_help_shows_what_people_type(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("serve", "worker", "api"):
        _, out = run(capsys, command, "--help")
        assert len(out.splitlines()) < 80, out
        assert "--database-url" in out
        assert "--retain-audit" not in out
        assert "`jobqueue settings` lists them" in " ".join(out.split())
    # Every setting is still a flag of theirs.
    args = build_parser().parse_args(["serve", "--retain-audit", "7d", "--tls-cert", "c.pem"])
    assert (args.setting_retain_audit, args.setting_tls_cert) == ("7d", "c.pem")


def test_settings_lists_every_variable_with_its_value(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s" * 40
    monkeypatch.setenv("WORKER_COUNT", "7")
    monkeypatch.setenv("JOBQUEUE_ADMIN_TOKEN", secret)
    monkeypatch.delenv("JOBQUEUE_ADMIN_TOKEN_FILE", raising=False)
    monkeypatch.delenv("MAX_ATTEMPTS", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:hunter2@db1:5432/jobs")
    code, out = run(capsys, "settings")
    assert code == 0
    for f in config.env_settings():
        assert f"{f.metadata['env']} ({config.flag_name(f)}): " in out
    assert "WORKER_COUNT (--worker-count): 7, from the environment\n" in out
    assert "MAX_ATTEMPTS (--max-attempts): 3, the default\n" in out
    assert "JOBQUEUE_ADMIN_TOKEN (no flag): set\n" in out
    assert "JOBQUEUE_ADMIN_TOKEN_FILE (no flag): unset\n" in out
    assert secret not in out
    assert "DATABASE_URL (--database-url): postgresql://app:***@db1:5432/jobs," in out
    assert "hunter2" not in out


def test_settings_refuses_a_bad_value_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_COUNT", "abc")
    with pytest.raises(SystemExit) as exited:
        main(["settings"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "jobqueue: error: WORKER_COUNT must be a positive integer, got 'abc'\n"
    )


def test_settings_markdown_is_the_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "settings", "--markdown")
    assert (code, out) == (0, markdown_table())


def subparsers(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action
