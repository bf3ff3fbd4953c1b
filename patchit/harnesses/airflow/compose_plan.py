"""What the compose harness runs, built without a Docker engine: the compose files, the
service, the mounts and the command. Kept apart from running it so every piece can be
checked (and `docker compose config` can validate it) on a machine with no engine.

The stack is the user's compose file as the candidate's worktree has it, so relative bind
mounts (`./dags:/opt/airflow/dags`) already point into the worktree. On top of it patchit
writes, in the candidate's scratch dir:
- an env file: the worktree's `.env` values, then `AIRFLOW_DAGS_DIR` (the dags folder in the
  worktree, for stacks that mount it from that variable, as `docker-compose.dev.yml` does)
  and `AIRFLOW_UID` (so the container writes into the worktree as the user who owns it);
- an override file binding the worktree's dags folder at the container's dags folder
  (`AIRFLOW__CORE__DAGS_FOLDER` of the service, else /opt/airflow/dags), and re-rooting every
  bind whose source is an absolute path in the user's repo into the worktree. Compose merges
  volumes by target, so these replace the user's mounts instead of adding to them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from patchit.errors import HarnessError
from patchit.events.model import UniversalFailureEvent

COMPOSE_NAME = re.compile(r"^(docker-)?compose([.-].*)?\.ya?ml$")
PREFERRED_SERVICES = ("airflow-cli", "airflow-worker", "airflow-scheduler")
DEFAULT_DAGS_FOLDER = "/opt/airflow/dags"
DAGS_ENV = "AIRFLOW_DAGS_DIR"


@dataclass
class ComposePlan:
    """Everything `docker compose run` needs for one candidate."""

    compose_files: list[Path]
    env_files: list[Path]
    project_name: str
    project_directory: Path
    service: str
    profiles: list[str]
    command: list[str]
    binds: dict[str, str] = field(default_factory=dict)  # container path -> host path
    container_dag_file: str = ""

    def display(self) -> str:
        """The command as a human would type it."""
        argv = ["docker", "compose"]
        for path in self.compose_files:
            argv += ["-f", str(path)]
        for path in self.env_files:
            argv += ["--env-file", str(path)]
        argv += ["--project-name", self.project_name, "run", "--rm", "--no-TTY", self.service]
        return shlex.join([*argv, *self.command])


def load_services(path: Path) -> dict[str, dict[str, Any]]:
    """The `services:` of a compose file as YAML (merge keys resolved, no interpolation)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise HarnessError(f"{path}: not a readable compose file ({exc})") from exc
    services = data.get("services") if isinstance(data, dict) else None
    return {str(k): v for k, v in (services or {}).items() if isinstance(v, dict)}


def airflow_services(services: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name, svc in services.items() if "airflow" in str(svc.get("image", ""))]


def find_compose_file(repo: Path, name: str | None = None) -> Path | None:
    """`name` in the repo, else the first `docker-compose*.yml`/`compose*.yml` at its root
    with an Airflow service (`docker-compose.yml`/`compose.yml` first, then by name)."""
    if name:
        path = repo / name
        return path if path.is_file() else None
    if not repo.is_dir():
        return None
    files = sorted(
        (p for p in repo.iterdir() if COMPOSE_NAME.match(p.name) and p.is_file()),
        key=lambda p: (p.stem not in ("docker-compose", "compose"), p.name),
    )
    for path in files:
        try:
            if airflow_services(load_services(path)):
                return path
        except HarnessError:
            continue
    return None


def _env_value(service: dict[str, Any], key: str) -> str | None:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(str(item).partition("=")[::2] for item in env)
    value = env.get(key) if isinstance(env, dict) else None
    return None if value is None else str(value)


def _bind_sources(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of the service's bind mounts as written (short or long syntax)."""
    binds: list[tuple[str, str]] = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str) and ":" in volume:
            source, target = volume.split(":")[:2]
            binds.append((source, target))
        elif isinstance(volume, dict) and volume.get("type") == "bind":
            binds.append((str(volume.get("source", "")), str(volume.get("target", ""))))
    return binds


def build_plan(
    *,
    compose_file: Path,
    root: Path,
    scratch: Path,
    event: UniversalFailureEvent,
    dag_file: Path,
    dags_folder: Path,
    project_name: str,
    service: str | None = None,
) -> ComposePlan:
    """The plan for re-running `event` with `compose_file` (a file inside the worktree)."""
    services = load_services(compose_file)
    candidates = airflow_services(services)
    chosen = service or next((s for s in PREFERRED_SERVICES if s in candidates), None)
    chosen = chosen or (candidates[0] if candidates else None)
    if chosen is None or chosen not in services:
        raise HarnessError(f"{compose_file.name}: no Airflow service to run the task in")
    svc = services[chosen]
    container_dags = _env_value(svc, "AIRFLOW__CORE__DAGS_FOLDER") or DEFAULT_DAGS_FOLDER
    binds = {container_dags: str(dags_folder)}
    repo = Path(event.repo_path).resolve() if event.repo_path else None
    for source, target in _bind_sources(svc):
        path = Path(source)
        if repo is not None and path.is_absolute() and path.resolve().is_relative_to(repo):
            binds.setdefault(target, str(root / path.resolve().relative_to(repo)))
    scratch.mkdir(parents=True, exist_ok=True)
    override = scratch / "compose.patchit.yml"
    volumes = [{"type": "bind", "source": s, "target": t} for t, s in binds.items()]
    override.write_text(yaml.safe_dump({"services": {chosen: {"volumes": volumes}}}))
    env_file = scratch / "compose.patchit.env"
    env_file.write_text(f"{DAGS_ENV}={dags_folder}\nAIRFLOW_UID={os.getuid()}\n")
    dotenv = compose_file.parent / ".env"
    container_dag = f"{container_dags.rstrip('/')}/{dag_file.relative_to(dags_folder)}"
    profiles = [str(p) for p in svc.get("profiles") or []]
    return ComposePlan(
        compose_files=[compose_file, override],
        env_files=[dotenv, env_file] if dotenv.is_file() else [env_file],
        project_name=project_name,
        project_directory=compose_file.parent,
        service=chosen,
        profiles=profiles,
        command=["bash", "-c", task_script(event, container_dag)],
        binds=binds,
        container_dag_file=container_dag,
    )


def task_script(event: UniversalFailureEvent, container_dag: str) -> str:
    """The DAG file's import check, then (unless the failure was the import) the task and the
    other failed tasks of its incident (`related_units`), each of which must pass."""
    path = json.dumps(container_dag)
    check = f'import runpy; runpy.run_path({path}, run_name="patchit_import_check")'
    script = shlex.join(["python", "-c", check])
    if event.status == "import_error":
        return script
    related = [str(u) for u in event.context.get("related_units") or []]
    tests = []
    for task in dict.fromkeys([event.unit_id, *related]):
        test = ["airflow", "tasks", "test", event.pipeline_id, task]
        if event.logical_date is not None:
            test.append(event.logical_date.isoformat())
        if task == event.unit_id and event.map_index is not None and event.map_index >= 0:
            test += ["--map-index", str(event.map_index)]
        tests.append(shlex.join(test))
    return " && ".join([script, *tests])
