"""`action.yml` at the repository root: a composite action whose inputs are all declared,
never pasted into a shell script (a pull request's branch name or arguments cannot inject
commands), and whose `patchit ci` step hands dbt's arguments through word by word and keeps
dbt's exit code for the last step. The step's script runs here under bash with a recording
`patchit` on PATH (the action's glue is what is tested; `patchit ci` itself is tested in
test_e2e_ci.py)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def _steps() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = ACTION["runs"]["steps"]
    return steps


def test_a_composite_action_whose_inputs_are_declared_and_never_in_scripts() -> None:
    assert ACTION["runs"]["using"] == "composite"
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    used = set(re.findall(r"inputs\.([\w-]+)", text))
    assert used <= set(ACTION["inputs"]), used - set(ACTION["inputs"])
    for step in _steps():
        assert "${{" not in step.get("run", ""), step.get("name")  # only through env
        if "run" in step:
            assert step["shell"] == "bash"


def test_the_ci_step_passes_dbt_args_and_keeps_dbts_exit_code(tmp_path: Path) -> None:
    [step] = [s for s in _steps() if s.get("id") == "ci"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "patchit"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done > "$ARGS_OUT"\nexit 3\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    output = tmp_path / "github-output"
    env = {
        **os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GITHUB_OUTPUT": str(output),
        "ARGS_OUT": str(tmp_path / "args"),
        "PATCHIT_DBT_ARGS": "build  --select state:modified+ --defer --state prod-state",
        "PATCHIT_PROJECT_DIR": "dbt project; rm -rf /", "PATCHIT_PROFILES_DIR": "",
        "PATCHIT_TARGET": "ci",
    }  # fmt: skip
    res = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr  # the exit code is kept for the last step
    assert output.read_text() == "exit-code=3\n"
    assert (tmp_path / "args").read_text().splitlines() == [
        "ci", "--project-dir", "dbt project; rm -rf /", "--target", "ci", "--",
        "build", "--select", "state:modified+", "--defer", "--state", "prod-state",
    ]  # fmt: skip
    [last] = _steps()[-1:]
    res = subprocess.run(["bash", "-c", last["run"]], env={**env, "CODE": "3"}, timeout=60)
    assert res.returncode == 3
