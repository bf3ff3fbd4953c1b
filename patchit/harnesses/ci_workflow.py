"""Reading the command set of one CI job from `.github/workflows/*.yml` (GitHub Actions).

Which job: `event.unit_id` is the job id (its key under `jobs:`), or its `name:`; a matrix
job's display name `test (3.11)` counts as `test`. The workflow is `context["workflow"]`
(a repo-relative path or a file name) when the event has it, else the file whose name, stem
or `name:` is `event.pipeline_id`, else any workflow; a job id found in two files is refused
until the event names the workflow.

The rule for steps: only `run:` steps are re-run, in order. `uses:` steps (actions such as
checkout or setup-python) are skipped: the worktree is the checkout and the harness's
interpreter is the toolchain. Steps whose `if:` calls `failure()`, `cancelled()` or
`always()` are clean-up or reporting and are skipped too; any other `if:` cannot be
evaluated here, so the step runs. `${{ env.X }}`, `${{ matrix.X }}` (from
`context["matrix"]`, else each matrix key's first value), `${{ github.workspace }}` and
`${{ runner.* }}` are substituted; any other expression (secrets, outputs of other steps)
becomes an empty string and the output says so. The job's `services:`/`container:` are not
started, and a note says that as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from patchit.errors import HarnessError
from patchit.events.model import UniversalFailureEvent

WORKFLOW_DIR = Path(".github") / "workflows"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
CLEANUP_IF = re.compile(r"\b(failure|cancelled|always)\s*\(\s*\)")
SHELLS = {
    "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail", "{0}"],
    "sh": ["sh", "-e", "{0}"],
    "python": ["python", "{0}"],
}


@dataclass
class CiStep:
    """One `run:` step, expressions substituted."""

    name: str
    script: str
    shell: list[str]  # argv with "{0}" where the script file goes
    env: dict[str, str] = field(default_factory=dict)
    working_directory: str | None = None
    continue_on_error: bool = False


@dataclass
class CiJob:
    """The steps of the failed job, and what was left out of them and why."""

    label: str  # "<workflow file>:<job id>"
    env: dict[str, str]
    steps: list[CiStep]
    notes: list[str] = field(default_factory=list)


def workflow_files(root: Path) -> list[Path]:
    folder = root / WORKFLOW_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file())


def _load(path: Path, root: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise HarnessError(f"{path.relative_to(root)}: not a readable workflow ({exc})") from exc
    return data if isinstance(data, dict) else {}


def _choose_files(root: Path, event: UniversalFailureEvent) -> list[tuple[Path, dict[str, Any]]]:
    files = [(p, _load(p, root)) for p in workflow_files(root)]
    if hint := event.context.get("workflow"):
        name = Path(str(hint)).name
        chosen = [(p, d) for p, d in files if p.name == name]
        if not chosen:
            raise HarnessError(f"{event.short()}: workflow {hint} is not in {WORKFLOW_DIR}")
        return chosen
    named = [
        (p, d) for p, d in files if event.pipeline_id in (p.name, p.stem, str(d.get("name", "")))
    ]
    return named or files


def _job_matches(job_id: str, job: Any, wanted: str) -> bool:
    names = {job_id, str(job.get("name", ""))} if isinstance(job, dict) else {job_id}
    return wanted in names or wanted.split(" (")[0] in names


def find_job(root: Path, event: UniversalFailureEvent, scratch: Path) -> CiJob:
    """The failed job's run steps from the worktree's workflow files."""
    found = [
        (path, data, job_id, job)
        for path, data in _choose_files(root, event)
        for job_id, job in (data.get("jobs") or {}).items()
        if _job_matches(str(job_id), job, event.unit_id)
    ]
    where = ", ".join(str(p.relative_to(root)) for p in workflow_files(root)) or "none"
    if not found:
        raise HarnessError(f"{event.short()}: no CI job {event.unit_id!r} in workflows ({where})")
    if len(found) > 1:
        files = ", ".join(str(p.relative_to(root)) for p, *_ in found)
        raise HarnessError(
            f"{event.short()}: job {event.unit_id!r} is in several workflows ({files}); "
            "name one in the event's context.workflow"
        )
    path, data, job_id, job = found[0]
    return _build_job(root, scratch, event, f"{path.relative_to(root)}:{job_id}", data, job)


def _matrix(job: dict[str, Any], event: UniversalFailureEvent) -> dict[str, str]:
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    values: dict[str, str] = {}
    if isinstance(matrix, dict):
        for key, options in matrix.items():
            if key not in ("include", "exclude") and isinstance(options, list) and options:
                values[str(key)] = str(options[0])
    given = event.context.get("matrix")
    if isinstance(given, dict):
        values.update({str(k): str(v) for k, v in given.items()})
    return values


class _Substituter:
    """Replaces `${{ ... }}` with what can be known outside GitHub; notes what could not."""

    def __init__(self, contexts: dict[str, dict[str, str]], notes: list[str]) -> None:
        self.contexts = contexts
        self.notes = notes

    def __call__(self, text: str, where: str) -> str:
        def one(match: re.Match[str]) -> str:
            scope, _, key = match.group(1).partition(".")
            value = self.contexts.get(scope, {}).get(key)
            if value is None:
                self.notes.append(f"{where}: ${{{{ {match.group(1)} }}}} is unknown here: ''")
                return ""
            return value

        return EXPRESSION.sub(one, text)


def _env(raw: Any, sub: _Substituter, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): sub("" if v is None else str(v).lower() if isinstance(v, bool) else str(v),
                        where) for k, v in raw.items()}  # fmt: skip


def _shell(spec: str | None, label: str) -> list[str]:
    if not spec:
        return list(SHELLS["bash"])
    if spec in SHELLS:
        return list(SHELLS[spec])
    if "{0}" in spec:
        return spec.split()
    raise HarnessError(
        f"{label}: shell {spec!r} cannot run here (bash, sh, python or a {{0}} form)"
    )


def _build_job(
    root: Path,
    scratch: Path,
    event: UniversalFailureEvent,
    label: str,
    workflow: dict[str, Any],
    job: dict[str, Any],
) -> CiJob:
    notes: list[str] = []
    runner = {"os": "Linux", "temp": str(scratch / "tmp"), "tool_cache": str(scratch / "tools")}
    contexts: dict[str, dict[str, str]] = {
        "matrix": _matrix(job, event),
        "github": {"workspace": str(root), "event_name": "push", "repository": event.pipeline_id},
        "runner": runner,
        "env": {},
    }
    sub = _Substituter(contexts, notes)
    env = _env(workflow.get("env"), sub, label)
    contexts["env"] = dict(env)
    env.update(_env(job.get("env"), sub, label))
    contexts["env"] = dict(env)
    defaults = {
        **((workflow.get("defaults") or {}).get("run") or {}),
        **((job.get("defaults") or {}).get("run") or {}),
    }
    if job.get("services") or job.get("container"):
        notes.append(f"{label}: the job's services/container are not started by patchit")
    steps: list[CiStep] = []
    for number, step in enumerate(job.get("steps") or [], start=1):
        if not isinstance(step, dict):
            continue
        name = str(step.get("name") or step.get("uses") or step.get("run", "")).splitlines()[0]
        name = name or f"step {number}"
        if "run" not in step:
            notes.append(f"skipped {name!r}: an action (uses:), not a command")
            continue
        if CLEANUP_IF.search(str(step.get("if", ""))):
            notes.append(f"skipped {name!r}: runs only on failure, cancel or always()")
            continue
        where = f"{label} step {name!r}"
        contexts["env"] = dict(env)
        step_env = _env(step.get("env"), sub, where)
        contexts["env"] = {**env, **step_env}
        workdir = step.get("working-directory") or defaults.get("working-directory")
        steps.append(
            CiStep(
                name=name,
                script=sub(str(step["run"]), where),
                shell=_shell(step.get("shell") or defaults.get("shell"), where),
                env=step_env,
                working_directory=str(workdir) if workdir else None,
                continue_on_error=step.get("continue-on-error") is True,
            )
        )
    if not steps:
        raise HarnessError(f"{label}: the job has no run: steps to re-run")
    return CiJob(label=label, env=env, steps=steps, notes=notes)
