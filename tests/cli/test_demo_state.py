"""`patchit demo` says where its state went and how to look at it again: the command it prints
lists the demo's incidents from another directory and another shell, where `PATCHIT_HOME` is
not set (`make demo` keeps its state in `var/`, which a plain `patchit incidents` elsewhere
does not read)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.cli.demo_cmd import look_again
from patchit.events.model import UniversalFailureEvent
from patchit.memory import Memory


def seed_incident(home: Path) -> str:
    event = UniversalFailureEvent.model_validate(
        {"source": "dbt", "pipeline_id": "shop", "unit_id": "model.shop.orders",
         "error_type": "E", "error_message": "boom", "repo_path": "/srv/shop"}
    )  # fmt: skip
    with Memory.open(home) as memory:
        return memory.create_incident(event, "fp-demo", "ck-demo").id


def run_as_printed(
    command: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "patchit"
    return subprocess.run(
        [sys.executable, "-m", "patchit", *argv[1:]],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def shell_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A later shell: no PATCHIT_HOME, its own (empty) default state dir."""
    monkeypatch.delenv("PATCHIT_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    return {k: v for k, v in os.environ.items() if k != "PATCHIT_HOME"}


def test_the_printed_command_finds_the_demos_incidents_from_elsewhere(
    tmp_path: Path, shell_env: dict[str, str]
) -> None:
    home = tmp_path / "checkout" / "var"  # as `make demo` sets it
    incident = seed_incident(home)
    command = look_again(home)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run_as_printed("patchit incidents", elsewhere, shell_env).stdout.strip() == (
        "no incidents"
    )  # what a user saw before: the demo's state is not where patchit looks untold
    listed = run_as_printed(command, elsewhere, shell_env)
    assert listed.returncode == 0, listed.stderr
    assert incident in listed.stdout


def test_a_state_dir_with_a_space_is_quoted(tmp_path: Path, shell_env: dict[str, str]) -> None:
    home = tmp_path / "my checkout" / "var"
    incident = seed_incident(home)
    listed = run_as_printed(look_again(home), tmp_path, shell_env)
    assert listed.returncode == 0, listed.stderr
    assert incident in listed.stdout


def test_the_default_state_dir_needs_no_home(tmp_path: Path, shell_env: dict[str, str]) -> None:
    home = tmp_path / "xdg" / "patchit"
    assert look_again(home) == "patchit incidents"
    incident = seed_incident(home)
    assert incident in run_as_printed(look_again(home), tmp_path, shell_env).stdout
