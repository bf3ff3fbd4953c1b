"""Edges of `patchit dbt` that the fast path must keep right (found in review): dbt writing
tracked files while it runs, a host process that runs the command itself, an unusable
PATCHIT_HOME, and work beside dbt that cannot start. dbt itself is replaced by a stand-in."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from patchit.cli import dbt_cmd
from patchit.cli.main import cli
from patchit.memory import Memory
from tests.conftest import commit_all, git

RESULTS = {"results": [{"unique_id": "model.p.m", "status": "success"}]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = tmp_path / "p"
    (repo / "target").mkdir(parents=True)
    (repo / "dbt_project.yml").write_text("name: p\nprofile: p\nversion: '1.0'\n")
    (repo / "target" / "manifest.json").write_text("{}\n")  # committed, as some teams do
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "a project with its target/ committed")
    return repo


def build(home: Path, repo: Path) -> Any:
    return CliRunner().invoke(
        cli, ["--home", str(home), "dbt", "--project-dir", str(repo), "--", "build"]
    )


def test_dbt_writing_tracked_files_does_not_make_the_tree_look_changed(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def dbt_writes_first(
        args: list[str],
        work_dir: Path,
        invocation: Any = None,
        meanwhile: Callable[[], None] | None = None,
        on_error: Callable[[], None] | None = None,
        spool_ticket: str | None = None,
    ) -> tuple[int, Any]:
        (project / "target" / "manifest.json").write_text('{"written": "by dbt"}\n')
        if meanwhile is not None:
            meanwhile()
        return 0, RESULTS  # fmt: skip

    monkeypatch.setattr(dbt_cmd, "run_dbt", dbt_writes_first)
    result = build(tmp_path / "home", project)
    assert result.exit_code == 0, result.output
    with Memory.open(tmp_path / "home") as memory:  # recorded: the tree was clean before dbt
        assert [r.unit_id for r in memory.unit_runs(str(project))] == ["model.p.m"]


def test_work_that_cannot_start_beside_dbt_is_done_after_it(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_thread(self: Any) -> None:
        raise RuntimeError("can't start new thread")

    def dbt(
        args: list[str],
        work_dir: Path,
        invocation: Any = None,
        meanwhile: Callable[[], None] | None = None,
        on_error: Callable[[], None] | None = None,
        spool_ticket: str | None = None,
    ) -> tuple[int, Any]:
        if meanwhile is not None:
            with contextlib.suppress(RuntimeError):  # as the real run_dbt: dbt goes on
                meanwhile()
        return 0, RESULTS  # fmt: skip

    monkeypatch.setattr(dbt_cmd._Meanwhile, "start", no_thread)
    monkeypatch.setattr(dbt_cmd, "run_dbt", dbt)
    assert build(tmp_path / "home", project).exit_code == 0
    with Memory.open(tmp_path / "home") as memory:
        assert len(memory.unit_runs(str(project))) == 1


def test_an_unusable_home_is_one_line_before_dbt(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "dbt", "--project-dir", str(project), "--", "build"],
        env={**os.environ, "PATCHIT_HOME": str(home)}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == (
        f"patchit: error: {home}/runs: cannot create patchit's run directory (Not a directory);"
        " set PATCHIT_HOME to a writable directory\n"
    )


HOST = """
import sys
import patchit.loop.loop  # noqa: F401  (as after a heal: the machinery is loaded)
from patchit.cli import dbt_cmd
import patchit.cli.main  # noqa: F401
entry = sys.modules["patchit.cli.main"]
entry.OWNS_PROCESS = {owns}
try:
    dbt_cmd._exit(3)
except SystemExit as exc:
    print("host caught", exc.code)
finally:
    print("host finally ran")
"""


@pytest.mark.parametrize("owns", [False, True])
def test_only_patchits_own_process_skips_teardown(owns: bool) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", HOST.format(owns=owns)], capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    if owns:  # `patchit` itself: ends at once with the code
        assert (proc.returncode, proc.stdout) == (3, ""), proc.stderr
    else:  # a host calling the command: gets its SystemExit and runs its finally
        assert proc.stdout.split("\n")[:2] == ["host caught 3", "host finally ran"], proc.stderr
