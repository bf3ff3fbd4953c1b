"""Every CLI command has help text (the docs' command reference is generated from it:
tests/docs/test_reference.py checks every command is there)."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from patchit.cli.main import LAZY_COMMANDS, cli


def walk(group: click.Group, prefix: str) -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group, info_name=prefix)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"{prefix} {name}"
        path = f"{prefix} {name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from walk(command, path)


COMMANDS = dict(walk(cli, "patchit"))


def test_walk_finds_the_nested_commands() -> None:
    assert {"patchit dbt", "patchit airflow", "patchit airflow scan"} <= set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_command_has_help(path: str) -> None:
    command = COMMANDS[path]
    assert (command.help or "").strip(), f"{path} has no help text"
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"{path} {param.opts[0]} has no help text"


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_lazy_short_help_is_the_commands_own(name: str) -> None:
    # `patchit --help` lists the copy kept in LAZY_COMMANDS; it must not drift from the command
    listed = click.Command(name, help=LAZY_COMMANDS[name].short_help)
    assert listed.get_short_help_str(200) == COMMANDS[f"patchit {name}"].get_short_help_str(200)
