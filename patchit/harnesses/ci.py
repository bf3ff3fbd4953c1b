"""The CI harness: the command set the repo's CI runs for the failed job, in the worktree.

A `source="ci"` event names the job in `unit_id` (its id under `jobs:`) and the workflow in
`context["workflow"]` or `pipeline_id`; `ci_workflow` reads that job's `run:` steps from the
worktree's `.github/workflows/*.yml` (the rule for which steps run is stated there). A harness
built with `commands=[...]` runs that list instead (one step per command, bash), for CI
systems patchit cannot read.

Each step runs in the sandbox with bash `-eo pipefail` (or its `shell:`), in its
`working-directory`, with the workflow, job and step `env:` and CI=true, `python` being the
interpreter that failed (`context["python"]`) or patchit's. Steps stop at the first failure
(unless `continue-on-error`), and the whole job shares one time limit. The output lists every
step's outcome and ends with the failing step's own output.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import ClassVar

from patchit.config import PatchitConfig, SandboxConfig
from patchit.errors import HarnessError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.redact import environment_secrets, redact
from patchit.harnesses.base import Screening, Verification, Workspace
from patchit.harnesses.ci_workflow import SHELLS, CiJob, CiStep, find_job, workflow_files
from patchit.harnesses.process import RunResult, run_sandboxed, scrubbed_env, tail
from patchit.sandbox.envrefs import names_in_text, referenced_env_names
from patchit.sandbox.isolation import Sandbox, make_sandbox
from patchit.screen.python import compile_for


def configured_job(commands: list[str]) -> CiJob:
    steps = [CiStep(name=c, script=c, shell=list(SHELLS["bash"])) for c in commands]
    return CiJob(label="configured commands", env={}, steps=steps)


class CiHarness:
    """Re-runs the failed CI job's commands in the candidate's worktree."""

    name: ClassVar[str] = "ci"

    def __init__(
        self,
        timeout_s: float = 600,
        sandbox: SandboxConfig | None = None,
        commands: list[str] | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.sandbox = sandbox or SandboxConfig()
        self.commands = list(commands or [])

    def configure(self, config: PatchitConfig) -> None:
        """The repo's time limit, sandbox settings and `[sandbox] ci_commands`."""
        self.timeout_s = config.loop.harness_timeout_s
        self.sandbox = config.sandbox
        if config.sandbox.ci_commands is not None:
            self.commands = list(config.sandbox.ci_commands)

    def warm_up(self, event: UniversalFailureEvent | None = None) -> None:
        """Nothing to start ahead of the first verify."""

    def applies_to(self, event: UniversalFailureEvent, repo: Path) -> bool:
        return event.source is FailureSource.CI and bool(self.commands or workflow_files(repo))

    def screen(
        self, workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening:
        """The changed `.py` files compiled, when the unit runs under patchit's own Python."""
        return compile_for(workspace.root, changed, event.context.get("python"))

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        started = time.monotonic()
        root = workspace.root.resolve()
        scratch = workspace.scratch.resolve()
        (scratch / "ci").mkdir(parents=True, exist_ok=True)
        job = configured_job(self.commands) if self.commands else find_job(root, event, scratch)
        python = Path(str(event.context.get("python") or sys.executable))
        if not python.is_file():
            raise HarnessError(f"{event.short()}: interpreter {python} does not exist here")
        path = os.pathsep.join([str(python.parent), os.environ.get("PATH", "")])
        referenced = referenced_env_names([root])
        for step in job.steps:
            referenced |= names_in_text(step.script, shell=True)
        base_env = scrubbed_env(scratch, {"CI": "true", "GITHUB_WORKSPACE": str(root),
                                          "PATH": path, **job.env}, referenced)  # fmt: skip
        prefix = python.absolute().parent.parent  # the interpreter's venv: readable inside
        box = make_sandbox(self.sandbox, [root, scratch], readable=[prefix])
        lines = [f"patchit: {job.label}: {len(job.steps)} run step(s)", *job.notes]
        failed: tuple[CiStep, RunResult] | None = None
        limit: str | None = None
        for number, step in enumerate(job.steps, start=1):
            remaining = self.timeout_s - (time.monotonic() - started)
            run = self._run_step(number, step, root, scratch, base_env, box, remaining)
            status = "ok" if run.ok else ("stopped" if run.limit_hit == "time" else "failed")
            lines.append(f"{status}: {step.name} ({run.duration_ms} ms, exit {run.returncode})")
            limit = limit or run.limit_hit
            if not run.ok and not (step.continue_on_error and run.limit_hit != "time"):
                failed = (step, run)
                break
        if failed is not None:
            lines += [f"--- output of the failing step {failed[0].name!r} ---", failed[1].output]
        passed = failed is None
        return Verification(
            passed=passed,
            harness=self.name,
            command=f"cd {shlex.quote(str(root))} && " + " && ".join(map(display, job.steps)),
            output=redact(tail("\n".join(lines)), environment_secrets()),
            failures=[] if passed else [event.unit_id],
            duration_ms=max(1, int((time.monotonic() - started) * 1000)),
            isolation=box.describe(),
            fidelity="runtime",
            limit_hit=None if passed else limit,
        )

    def release(self, area: Path) -> None:
        """Nothing outside the filesystem to release."""

    def close(self) -> None:
        """Nothing to release: every step is its own process."""

    @staticmethod
    def _run_step(
        number: int,
        step: CiStep,
        root: Path,
        scratch: Path,
        base_env: dict[str, str],
        box: Sandbox,
        remaining_s: float,
    ) -> RunResult:
        script = scratch / "ci" / f"step-{number}.script"
        script.write_text(step.script, encoding="utf-8")
        argv = [str(script) if part == "{0}" else part for part in step.shell]
        cwd = root / step.working_directory if step.working_directory else root
        if not cwd.resolve().is_relative_to(root):
            raise HarnessError(f"step {step.name!r}: working-directory {cwd} leaves the worktree")
        return run_sandboxed(
            argv, cwd=cwd, env={**base_env, **step.env}, sandbox=box,
            timeout_s=remaining_s, log_path=scratch / "ci" / f"step-{number}.log",
        )  # fmt: skip


def display(step: CiStep) -> str:
    """A step as one command a human could paste."""
    return shlex.join([*(part for part in step.shell if part != "{0}"), "-c", step.script])
