"""A click group whose subcommands are imported only when one of them is used.

Listing them (`patchit --help`) reads the short help kept beside each import path, so it
imports nothing; invoking a subcommand, or asking for its own help, imports its module.
This is click's documented LazyGroup pattern, plus the listing without imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, NamedTuple

import click


class LazyCommand(NamedTuple):
    """Where a subcommand lives ("package.module:attr") and its one-line help for listings."""

    import_path: str
    short_help: str


class LazyGroup(click.Group):
    def __init__(
        self, *args: Any, lazy_commands: Mapping[str, LazyCommand] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            self.add_command(self.load_command(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def load_command(self, cmd_name: str) -> click.Command:
        module_name, attr = self.lazy_commands[cmd_name].import_path.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}:{attr} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own version calls get_command() for every name, which would import them all
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows: list[tuple[str, str]] = []
        for name in names:
            if name in self.lazy_commands and name not in self.commands:
                # a stand-in shortens the text exactly as the real command would
                command = click.Command(name, help=self.lazy_commands[name].short_help)
            else:
                command = self.commands[name]
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
