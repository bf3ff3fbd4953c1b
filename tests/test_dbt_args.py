"""dbt's command line as patchit reads it: options, subcommand, selection, shell commands."""

from __future__ import annotations

import pytest

from patchit.text.dbt_args import (
    dbt_args_in_shell,
    dbt_command,
    is_full_build,
    option_value,
    runs_dbt_in_shell,
)


def test_option_value_in_both_spellings_first_name_wins() -> None:
    args = ["build", "--target", "prod", "--vars={x: 1}", "--profiles-dir"]
    assert option_value(args, "--target", "-t") == "prod"
    assert option_value(["run", "-t", "dev"], "--target", "-t") == "dev"
    assert option_value(args, "--vars") == "{x: 1}"
    assert option_value(args, "--profiles-dir") is None  # no value after it
    assert option_value(args, "--target-path") is None


@pytest.mark.parametrize(
    ("args", "command", "full"),
    [
        (["build"], "build", True),
        (["--debug", "build", "--full-refresh"], "build", True),
        (["build", "--select", "orders+"], "build", False),
        (["build", "-s", "orders"], "build", False),
        (["build", "--exclude=orders"], "build", False),
        (["build", "--resource-type", "model"], "build", False),
        (["run"], "run", False),
        (["--version"], "", False),
    ],
)
def test_command_and_full_build(args: list[str], command: str, full: bool) -> None:
    assert dbt_command(args) == command
    assert is_full_build(args) is full


def test_dbt_in_a_shell_command() -> None:
    command = "cd /opt/shop && /usr/bin/dbt build --select 'orders+' --target prod && echo ok"
    assert runs_dbt_in_shell(command)
    assert dbt_args_in_shell(command) == ["build", "--select", "orders+", "--target", "prod"]
    assert dbt_args_in_shell("dbt test ; dbt docs generate # nightly") == ["test"]
    assert not runs_dbt_in_shell("dbt deps") and not runs_dbt_in_shell("echo dbtbuild")
    assert dbt_args_in_shell("echo hello") is None
    assert dbt_args_in_shell("dbt run --vars '{a: 1") == ["run", "--vars", "'{a:", "1"]
