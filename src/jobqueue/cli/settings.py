"""``settings``: every setting with its variable, flag, default and value here; or the
table of docs/configuration.md (``--markdown``)."""

from __future__ import annotations

import argparse
import os
import re
import textwrap

from jobqueue import config
from jobqueue.cli.common import Commands
from jobqueue.settings_docs import markdown_table, shown


def add_settings_command(commands: Commands) -> None:
    text = "every setting: its variable, flag, default and value here"
    cmd = commands.add_parser(
        "settings",
        help=text,
        description="Every setting, with its variable, its flag (of serve, worker and "
        "api), its default and its value in this environment. A flag wins over its "
        "variable, which wins over the default. Secrets show only whether they are set, "
        "and a DSN's password is masked.",
    )
    cmd.add_argument(
        "--markdown",
        action="store_true",
        help="print the table of docs/configuration.md instead (no values)",
    )
    cmd.set_defaults(run=run_settings)


def run_settings(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    settings = config.load()  # a bad value is refused here as at start-up, in one line
    for f in config.env_settings():
        env = f.metadata["env"]
        origin = "from the environment" if env in os.environ else "the default"
        value = _without_password(shown(getattr(settings, f.name)))
        print(f"{env} ({config.flag_name(f)}): {value}, {origin}")
        print(_indented(f"Default: {shown(f.default)}. {f.metadata['doc']}"))
    for variable in config.SECRET_VARIABLES:
        state = "set" if os.environ.get(variable.env) else "unset"
        print(f"{variable.env} (no flag): {state}")
        print(_indented(variable.doc))
    return 0


def _without_password(value: str) -> str:
    """A DSN's password masked: the output may be pasted into an issue."""
    return re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", value)


def _indented(text: str) -> str:
    return textwrap.fill(text, 88, initial_indent="    ", subsequent_indent="    ")
