"""Reading dbt's command line: option values, the subcommand, whether a run selects, and the
arguments of a `dbt ...` call inside a shell command.

The one place patchit parses dbt arguments, for the `patchit dbt` wrapper, the intake, the
sandbox and the Airflow callback alike. Standard library only and import-light: the callback
imports it inside the Airflow task process.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# options that narrow a run to part of the project
SELECTION_OPTIONS = frozenset(
    {"--select", "-s", "--models", "-m", "--exclude", "--selector", "--resource-type"}
)
# `dbt build|run|test` anywhere in a shell command (after a path, `;`, `&&`, `(`, ...)
_DBT_IN_SHELL = re.compile(r"(?:^|[\s;&|(/])dbt\s+(build|run|test)\b")
_SHELL_STOP = {"&&", "||", ";", "|", ")"}


def option_value(args: Sequence[str], *names: str) -> str | None:
    """The value of the first of `names` given, as `--name value` or `--name=value`."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


# dbt's subcommands: the subcommand is the first of these, so global options may come first
COMMANDS = frozenset(
    {"build", "run", "test", "seed", "snapshot", "compile", "parse", "ls", "list", "show",
     "run-operation", "source", "docs", "clone", "retry", "debug", "deps", "clean", "init"}
)  # fmt: skip


def dbt_command(args: Sequence[str]) -> str:
    """The subcommand (`build`, `run`, ...): the first known subcommand in `args`, else the
    first argument that is not an option."""
    known = next((a for a in args if a in COMMANDS), None)
    return known or next((a for a in args if not a.startswith("-")), "")


def is_full_build(args: Sequence[str]) -> bool:
    """A `dbt build` of the whole project (no selection): only that vouches for every model."""
    selecting = any(a.split("=")[0] in SELECTION_OPTIONS for a in args)
    return dbt_command(args) == "build" and not selecting


def runs_dbt_in_shell(command: str) -> bool:
    """Whether a shell command runs `dbt build`, `dbt run` or `dbt test`."""
    return _DBT_IN_SHELL.search(command) is not None


def dbt_args_in_shell(command: str) -> list[str] | None:
    """The arguments after `dbt` in a shell command (up to the next shell operator); None
    when it calls no dbt."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:
        tokens = command.split()
    for i, token in enumerate(tokens):
        if token.rsplit("/", 1)[-1] == "dbt" and i + 1 < len(tokens):
            args: list[str] = []
            for arg in tokens[i + 1 :]:
                if arg in _SHELL_STOP:
                    break
                args.append(arg)
            return args
    return None
