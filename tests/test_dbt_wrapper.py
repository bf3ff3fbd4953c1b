"""The dbt wrapper's healing policy, in the library (`patchit.dbt_wrapper`), without dbt."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from patchit.dbt_args import is_full_build
from patchit.dbt_wrapper import DbtRun, heal_dbt_run
from patchit.loop import project_key_for
from patchit.memory import Memory

STARTED = datetime(2026, 11, 26, tzinfo=UTC)


@pytest.mark.parametrize(
    ("args", "full"),
    [
        (["build"], True),
        (["build", "--project-dir", "p", "--target", "dev"], True),
        (["--no-partial-parse", "build"], True),
        (["build", "--select", "orders+"], False),
        (["build", "-s=orders"], False),
        (["build", "--exclude", "x"], False),
        (["run"], False),
        (["test"], False),
    ],
)
def test_only_a_whole_project_build_is_full(args: list[str], full: bool) -> None:
    assert is_full_build(args) is full


def run_of(tmp_path: Path, code: int, args: list[str], **kw: object) -> DbtRun:
    fields: dict[str, object] = {
        "exit_code": code, "record": {}, "args": args, "project": tmp_path / "shop",
        "repo": tmp_path, "commit": "a" * 40, "started": STARTED, **kw,
    }  # fmt: skip
    return DbtRun(**fields)  # type: ignore[arg-type]


def test_a_green_full_build_on_a_clean_tree_is_the_last_good_commit(
    tmp_path: Path, _patchit_home: Path
) -> None:
    said: list[str] = []
    with Memory.open(_patchit_home) as memory:
        key = project_key_for(tmp_path, tmp_path / "shop")
        heal_dbt_run(run_of(tmp_path, 0, ["build", "-s", "x"]), _patchit_home, memory, said.append)
        heal_dbt_run(run_of(tmp_path, 0, ["build"], dirty=["m.sql"]), _patchit_home, memory,
                     said.append)  # fmt: skip
        assert memory.last_good(key) is None
        heal_dbt_run(run_of(tmp_path, 0, ["build"]), _patchit_home, memory, said.append)
        assert memory.last_good(key) == "a" * 40
    assert said == []


def test_nothing_to_heal_is_said_once_and_heals_nothing(
    tmp_path: Path, _patchit_home: Path
) -> None:
    said: list[str] = []
    with Memory.open(_patchit_home) as memory:
        usage = run_of(tmp_path, 2, ["bild"], record={"usage_error": True})
        assert heal_dbt_run(usage, _patchit_home, memory, said.append) == []
        assert heal_dbt_run(run_of(tmp_path, 2, ["build"]), _patchit_home, memory,
                            said.append) == []  # fmt: skip
        assert memory.list_incidents() == []
    assert said == ["dbt exited 2 without a result patchit could read; nothing to heal"]
