"""The Python harness: the failing pytest node ids, or the failing callable, in the worktree.

How a `source="python"` event names its unit (the contract with intake and with users who
write events by hand):

- `context["pytest_node_ids"]`: a list of pytest node ids, run together; else `unit_id`:
- a pytest node id (`tests/test_x.py::test_y`, `tests/test_x.py::TestA::test_b[1]`) or a
  test file (`tests/test_x.py`) -> `python -m pytest <ids>`; fidelity "runtime";
- `module:callable` (`shop.jobs:load`, `shop.jobs:Loader.run`) -> that callable imported and
  called in a fresh interpreter, with `context["call_args"]` / `context["call_kwargs"]` (JSON)
  if the failure had arguments; fidelity "runtime";
- any other `.py` file, or a dotted module name -> the module imported (its body run, not its
  `__main__` block): only proves it imports; fidelity "file".

Paths are relative to the repository root (absolute ones inside `repo_path` are re-rooted).
It runs with `context["python"]` (the interpreter that failed) or patchit's own, in
`context["cwd"]` (repo-relative) or the worktree root, with the worktree root, its `src/`,
`context["python_path"]` entries and the user's PYTHONPATH (re-rooted into the worktree)
first on the path, so the candidate's code is imported, never the user's checkout.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from patchit.config import PatchitConfig, SandboxConfig
from patchit.errors import HarnessError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.redact import environment_secrets, redact
from patchit.harnesses.airflow.harness import repo_relative
from patchit.harnesses.base import Screening, Verification, Workspace
from patchit.harnesses.process import run_sandboxed, scrubbed_env
from patchit.sandbox.envrefs import referenced_env_names
from patchit.sandbox.isolation import make_sandbox
from patchit.screen.python import compile_for

CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
MODULE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*$")
TEST_FILE = re.compile(r"^(test_.*|.*_test)\.py$")
# pytest's short summary (-rfE): "FAILED tests/test_x.py::test_y - AssertionError: ..."
SUMMARY_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$", re.MULTILINE)

# Imports `module`, resolves `attr.path`, calls it; an exception exits 1 with its traceback.
CALL_RUNNER = """\
import asyncio, importlib, inspect, json, sys
module, _, attr = sys.argv[1].partition(":")
target = importlib.import_module(module)
for part in attr.split("."):
    target = getattr(target, part)
result = target(*json.loads(sys.argv[2]), **json.loads(sys.argv[3]))
if inspect.iscoroutine(result):
    result = asyncio.run(result)
print("patchit: " + sys.argv[1] + " returned " + repr(result)[:300])
"""
IMPORT_RUNNER = """\
import importlib, runpy, sys
target = sys.argv[1]
if target.endswith(".py"):
    runpy.run_path(target, run_name="patchit_import_check")
else:
    importlib.import_module(target)
print("patchit: " + target + " imports cleanly")
"""


@dataclass
class PythonUnit:
    """What to re-run: kind is "pytest", "callable" or "import"; targets as the event said."""

    kind: str
    targets: list[str]


def parse_unit(event: UniversalFailureEvent) -> PythonUnit:
    """The unit a python event names (see the module docstring for the forms)."""
    repo = Path(event.repo_path) if event.repo_path else None
    node_ids = event.context.get("pytest_node_ids")
    if node_ids:
        if not isinstance(node_ids, list) or not all(isinstance(n, str) for n in node_ids):
            raise HarnessError(f"{event.short()}: context.pytest_node_ids must be a list of ids")
        return PythonUnit("pytest", [_rel_node(n, repo) for n in node_ids])
    unit = event.unit_id.strip()
    if "::" in unit or (unit.endswith(".py") and TEST_FILE.match(Path(unit).name)):
        return PythonUnit("pytest", [_rel_node(unit, repo)])
    if CALLABLE.match(unit):
        return PythonUnit("callable", [unit])
    if unit.endswith(".py"):
        return PythonUnit("import", [str(repo_relative(unit, repo))])
    if MODULE.match(unit):
        return PythonUnit("import", [unit])
    raise HarnessError(
        f"{event.short()}: unit_id {unit!r} is not a pytest node id, a module:callable, "
        "a .py file or a module name"
    )


def _rel_node(node_id: str, repo: Path | None) -> str:
    path, sep, rest = node_id.partition("::")
    return f"{repo_relative(path, repo)}{sep}{rest}"


def failed_node_ids(output: str, requested: list[str]) -> list[str]:
    """The requested ids that failed (a parametrised or nested id counts for its parent),
    then every other id pytest's summary names."""
    failed = list(dict.fromkeys(SUMMARY_LINE.findall(output)))
    hit = [r for r in requested if any(f == r or f.startswith((r + "::", r + "[")) for f in failed)]
    return hit + [f for f in failed if f not in hit]


class PythonHarness:
    """Re-runs the failing pytest node ids or callable in the candidate's worktree."""

    name: ClassVar[str] = "python"

    def __init__(self, timeout_s: float = 600, sandbox: SandboxConfig | None = None) -> None:
        self.timeout_s = timeout_s
        self.sandbox = sandbox or SandboxConfig()

    def configure(self, config: PatchitConfig) -> None:
        """The repo's time limit and sandbox settings (isolation, network, memory)."""
        self.timeout_s = config.loop.harness_timeout_s
        self.sandbox = config.sandbox

    def warm_up(self, event: UniversalFailureEvent | None = None) -> None:
        """Nothing to start ahead of the first verify."""

    def applies_to(self, event: UniversalFailureEvent, repo: Path) -> bool:
        return event.source is FailureSource.PYTHON

    def screen(
        self, workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening:
        """The changed `.py` files compiled, when the unit runs under patchit's own Python."""
        return compile_for(workspace.root, changed, event.context.get("python"))

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        unit = parse_unit(event)
        root = workspace.root.resolve()
        scratch = workspace.scratch.resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        python = str(event.context.get("python") or sys.executable)
        if not Path(python).is_file():
            raise HarnessError(f"{event.short()}: interpreter {python} does not exist here")
        cwd = root / repo_relative(str(event.context.get("cwd") or "."), _repo(event))
        argv = self._argv(python, unit, event)
        python_path = self._python_path(root, event)
        referenced = referenced_env_names([root])
        env = scrubbed_env(scratch, {"PYTHONPATH": python_path}, referenced)
        readable = [Path(p) for p in python_path.split(os.pathsep) if p]
        box = make_sandbox(self.sandbox, [root, scratch], readable=[*readable, _prefix(python)])
        run = run_sandboxed(
            argv, cwd=cwd, env=env, sandbox=box, timeout_s=self.timeout_s,
            log_path=scratch / "python_output.log",
        )  # fmt: skip
        passed = run.ok
        failures: list[str] = []
        if not passed:
            failures = failed_node_ids(run.output, unit.targets) if unit.kind == "pytest" else []
            if event.unit_id not in failures:
                failures.insert(0, event.unit_id)
        return Verification(
            passed=passed,
            harness=self.name,
            command=f"cd {shlex.quote(str(cwd))} && {self._display(unit, python, event)}",
            output=redact(run.output, environment_secrets()),
            failures=failures,
            duration_ms=run.duration_ms,
            isolation=box.describe(),
            fidelity="file" if unit.kind == "import" else "runtime",
            limit_hit=run.limit_hit,
        )

    def release(self, area: Path) -> None:
        """Nothing outside the filesystem to release."""

    def close(self) -> None:
        """Nothing to release: every run is its own process."""

    @staticmethod
    def _argv(python: str, unit: PythonUnit, event: UniversalFailureEvent) -> list[str]:
        if unit.kind == "pytest":
            return [python, "-m", "pytest", "-rfE", "--no-header", "-p", "no:cacheprovider",
                    *unit.targets]  # fmt: skip
        if unit.kind == "callable":
            args = json.dumps(event.context.get("call_args") or [])
            kwargs = json.dumps(event.context.get("call_kwargs") or {})
            return [python, "-c", CALL_RUNNER, unit.targets[0], args, kwargs]
        return [python, "-c", IMPORT_RUNNER, unit.targets[0]]

    @staticmethod
    def _display(unit: PythonUnit, python: str, event: UniversalFailureEvent) -> str:
        """The command as a human would type it (the runners are inline scripts)."""
        if unit.kind == "pytest":
            return shlex.join([python, "-m", "pytest", *unit.targets])
        module, _, attr = unit.targets[0].partition(":")
        if unit.kind == "callable":
            call = f"from {module} import {attr.split('.')[0]}; {attr}()"
            return shlex.join([python, "-c", call])
        if module.endswith(".py"):
            return shlex.join([python, "-c", f"import runpy; runpy.run_path({module!r})"])
        return shlex.join([python, "-c", f"import {module}"])

    @staticmethod
    def _python_path(root: Path, event: UniversalFailureEvent) -> str:
        repo = _repo(event)
        entries = [root]
        if (root / "src").is_dir():
            entries.append(root / "src")
        for text in event.context.get("python_path") or []:
            entries.append(root / repo_relative(str(text), repo))
        for text in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            if not text:
                continue
            entry = Path(text).resolve()
            if repo is not None and (entry == repo.resolve() or repo.resolve() in entry.parents):
                entry = root / entry.relative_to(repo.resolve())
            entries.append(entry)
        return os.pathsep.join(str(e) for e in dict.fromkeys(entries))


def _prefix(python: str) -> Path:
    """The install prefix of an interpreter (its venv), which the sandbox must let it read."""
    return Path(python).absolute().parent.parent


def _repo(event: UniversalFailureEvent) -> Path | None:
    return Path(event.repo_path) if event.repo_path else None
