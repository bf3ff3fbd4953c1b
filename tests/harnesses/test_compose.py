"""ComposeHarness and docker-compose.dev.yml, up to the engine boundary with the real docker
CLI and `docker compose config` (which needs no engine); the live run needs an engine and is
skipped only when none answers, with what docker said in the skip reason."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from python_on_whales import DockerClient

from patchit.errors import HarnessError
from patchit.examples import AIRFLOW_PROJECT
from patchit.harnesses.airflow.compose import (
    ComposeHarness,
    docker_client,
    docker_config_dir,
    engine_problem,
)
from patchit.harnesses.airflow.compose_plan import find_compose_file, task_script
from patchit.harnesses.base import Workspace
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import ROOT, commit_all
from tests.harnesses.airflow_fixtures import (
    REPORTS_DAG,
    add_slow_dag,
    airflow_event,
    break_with_key_error,
    make_airflow_repo,
)
from tests.harnesses.contract import SLOW_TIMEOUT_S, HarnessCase, HarnessContract, MakeCase

DEV_STACK = ROOT / "docker-compose.dev.yml"
AIRFLOW_IMAGE = "apache/airflow:3.3.2"
ENGINE_PROBLEM = engine_problem()


def compose_config(client: DockerClient) -> dict[str, Any]:
    """`docker compose config` through python-on-whales: real validation, no engine needed."""
    assert shutil.which("docker"), "the docker CLI is needed (an engine is not)"
    config: dict[str, Any] = client.compose.config(return_json=True)
    return config


def stack_client(**kwargs: Any) -> DockerClient:
    return DockerClient(config=docker_config_dir(), **kwargs)


def bind_of(service: dict[str, Any], target: str) -> list[str]:
    return [v["source"] for v in service.get("volumes", []) if v.get("target") == target]


@pytest.mark.slow  # docker
def test_the_dev_stack_validates(tmp_path: Path) -> None:
    dags = tmp_path / "dags"
    env_file = tmp_path / "stack.env"
    env_file.write_text(f"AIRFLOW_DAGS_DIR={dags}\n")
    config = compose_config(
        stack_client(compose_files=[DEV_STACK], compose_env_files=[env_file],
                     compose_profiles=["cli"])
    )  # fmt: skip
    services = config["services"]
    assert set(services) == {
        "postgres", "airflow-init", "airflow-apiserver", "airflow-scheduler",
        "airflow-dag-processor", "airflow-cli",
    }  # fmt: skip
    assert services["postgres"]["image"].startswith("postgres:")
    commands = {name: svc.get("command") for name, svc in services.items()}
    assert commands["airflow-apiserver"] == ["api-server"]
    assert commands["airflow-scheduler"] == ["scheduler"]
    assert commands["airflow-dag-processor"] == ["dag-processor"]
    assert commands["airflow-init"] == ["db", "migrate"]
    for name, svc in services.items():
        if name == "postgres":
            continue
        assert svc["image"] == AIRFLOW_IMAGE
        assert bind_of(svc, "/opt/airflow/dags") == [str(dags)]
        env = svc["environment"]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres/airflow")
        if name != "airflow-init":
            assert svc["depends_on"]["airflow-init"]["condition"] == (
                "service_completed_successfully"
            )
    # Without the variable the example DAGs are mounted, relative to the compose file.
    default = compose_config(stack_client(compose_files=[DEV_STACK]))
    scheduler = default["services"]["airflow-scheduler"]
    assert bind_of(scheduler, "/opt/airflow/dags") == [str(AIRFLOW_PROJECT / "dags")]


@pytest.fixture
def compose_repo(tmp_path: Path) -> Path:
    """The example DAGs and the dev stack in a user's repo."""
    repo = make_airflow_repo(tmp_path / "user-repo")
    shutil.copyfile(DEV_STACK, repo / "docker-compose.dev.yml")
    commit_all(repo, "dev stack")
    return repo


@pytest.fixture
def make_case(compose_repo: Path, _patchit_home: Path) -> Iterator[MakeCase]:
    roots: list[Path] = []

    def make(kind: str) -> HarnessCase:
        root = create_worktree(compose_repo, "HEAD", worktrees_home() / f"{kind}-{len(roots)}")
        roots.append(root)
        dag_id, task_id, dag_file, expected = "shop_reports", "write_report", REPORTS_DAG, ""
        if kind == "broken":
            expected = break_with_key_error(root)
        elif kind == "slow":
            add_slow_dag(root)
            dag_id, task_id, dag_file = "slow_dag", "nap", "examples/airflow/dags/slow_dag.py"
        scratch = _patchit_home / "scratch" / f"{kind}-{len(roots)}"
        return HarnessCase(
            user_repo=compose_repo,
            workspace=Workspace(root=root, scratch=scratch),
            event=airflow_event(compose_repo, dag_id, task_id, dag_file),
            expected_error=expected,
            changed=[dag_file],
        )

    yield make
    for root in roots:
        remove_worktree(compose_repo, root)


@pytest.mark.slow  # docker
def test_the_plan_mounts_the_worktree_and_runs_the_task(make_case: MakeCase) -> None:
    case = make_case("good")
    harness = ComposeHarness()
    plan = harness.plan(case.workspace, case.event)
    root, dags = case.workspace.root, case.workspace.root / "examples" / "airflow" / "dags"
    assert plan.service == "airflow-cli" and plan.profiles == ["cli"]
    assert plan.project_name == harness.project_name and plan.project_name.startswith("patchit-")
    assert plan.container_dag_file == "/opt/airflow/dags/shop_reports.py"
    assert plan.binds == {"/opt/airflow/dags": str(dags)}
    assert plan.command == [
        "bash", "-c",
        "python -c 'import runpy; runpy.run_path(\"/opt/airflow/dags/shop_reports.py\", "
        "run_name=\"patchit_import_check\")' && "
        "airflow tasks test shop_reports write_report 2024-01-01T00:00:00+00:00",
    ]  # fmt: skip
    scratch = case.workspace.scratch.resolve()
    assert plan.display().startswith(
        f"docker compose -f {root}/docker-compose.dev.yml -f {scratch}/compose.patchit.yml "
        f"--env-file {scratch}/compose.patchit.env --project-name {plan.project_name} "
        "run --rm --no-TTY airflow-cli bash -c "
    )
    # What compose itself makes of the plan: the worktree's dags folder, once, where the
    # stack mounts its DAGs; the user's checkout nowhere; files written as this user.
    config = compose_config(docker_client(plan))
    assert config["name"] == plan.project_name
    cli = config["services"]["airflow-cli"]
    assert bind_of(cli, "/opt/airflow/dags") == [str(dags)]
    assert cli["user"] == f"{os.getuid()}:0"
    assert str(case.user_repo) not in json.dumps(config)


@pytest.mark.slow  # docker
def test_absolute_binds_into_the_users_repo_are_rerooted(
    compose_repo: Path, _patchit_home: Path
) -> None:
    (compose_repo / "plugins").mkdir()
    (compose_repo / "plugins" / "README").write_text("plugins\n")
    (compose_repo / "docker-compose.yml").write_text(
        f"""services:
  scheduler:
    image: {AIRFLOW_IMAGE}
    command: scheduler
    volumes:
      - {compose_repo}/examples/airflow/dags:/srv/dags
      - {compose_repo}/plugins:/opt/airflow/plugins
      - type: bind
        source: /etc/hostname
        target: /etc/host-name
    environment:
      - AIRFLOW__CORE__DAGS_FOLDER=/srv/dags
"""
    )
    commit_all(compose_repo, "the user's own stack, absolute paths")
    root = create_worktree(compose_repo, "HEAD", worktrees_home() / "abs")
    workspace = Workspace(root=root, scratch=_patchit_home / "scratch" / "abs")
    event = airflow_event(compose_repo, "shop_reports", "write_report", REPORTS_DAG)
    plan = ComposeHarness().plan(workspace, event)
    assert plan.compose_files[0] == root / "docker-compose.yml"  # preferred over .dev.yml
    assert plan.service == "scheduler" and plan.container_dag_file == "/srv/dags/shop_reports.py"
    scheduler = compose_config(docker_client(plan))["services"]["scheduler"]
    assert bind_of(scheduler, "/srv/dags") == [str(root / "examples/airflow/dags")]
    assert bind_of(scheduler, "/opt/airflow/plugins") == [str(root / "plugins")]
    assert bind_of(scheduler, "/etc/host-name") == ["/etc/hostname"]  # not the repo's: kept
    remove_worktree(compose_repo, root)


@pytest.mark.slow  # docker
def test_verify_goes_as_far_as_the_engine(
    make_case: MakeCase, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Against an engine socket nobody listens on, compose accepts the project and the run
    command and stops at the connection: the HarnessError says so, applies_to says no."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    case = make_case("good")
    harness = ComposeHarness()
    assert "Cannot connect to the Docker daemon" in (harness.engine_problem() or "")
    assert not harness.applies_to(case.event, case.user_repo)
    with pytest.raises(
        HarnessError, match=r"no Docker engine answers \(.*Cannot connect to the Docker daemon"
    ):
        harness.verify(case.workspace, case.event)
    harness.close()


def test_import_errors_are_checked_by_import_only(compose_repo: Path) -> None:
    event = airflow_event(compose_repo, "shop_orders", "publish", "examples/airflow/dags/x.py")
    event.status = "import_error"
    script = task_script(event, "/opt/airflow/dags/x.py")
    assert 'runpy.run_path("/opt/airflow/dags/x.py"' in script
    assert "airflow tasks test" not in script


def test_every_failed_task_of_the_incident_is_tested(compose_repo: Path) -> None:
    event = airflow_event(compose_repo, "shop_orders", "publish", "examples/airflow/dags/x.py")
    event.context["related_units"] = ["notify", "publish"]
    script = task_script(event, "/opt/airflow/dags/x.py")
    assert script.count("airflow tasks test") == 2
    day = event.logical_date.isoformat() if event.logical_date else ""
    assert script.endswith(
        f"&& airflow tasks test shop_orders publish {day}"
        f" && airflow tasks test shop_orders notify {day}"
    )


def test_finding_the_compose_file(tmp_path: Path) -> None:
    (tmp_path / "compose.yml").write_text("services:\n  cache:\n    image: redis:7\n")
    assert find_compose_file(tmp_path) is None  # no Airflow service
    shutil.copyfile(DEV_STACK, tmp_path / "docker-compose.dev.yml")
    assert find_compose_file(tmp_path) == tmp_path / "docker-compose.dev.yml"
    (tmp_path / "docker-compose.yml").write_text(f"services:\n  a:\n    image: {AIRFLOW_IMAGE}\n")
    assert find_compose_file(tmp_path) == tmp_path / "docker-compose.yml"
    assert find_compose_file(tmp_path, "compose.yml") == tmp_path / "compose.yml"
    assert find_compose_file(tmp_path, "missing.yml") is None


@pytest.mark.slow
@pytest.mark.skipif(
    ENGINE_PROBLEM is not None,
    reason=f"no Docker engine answers ({ENGINE_PROBLEM}): the live compose run needs one",
)
class TestComposeHarnessLive(HarnessContract):
    @pytest.fixture
    def harness(self) -> Iterator[ComposeHarness]:
        with ComposeHarness() as harness:
            yield harness

    @pytest.fixture
    def slow_harness(self) -> Iterator[ComposeHarness]:
        with ComposeHarness(timeout_s=SLOW_TIMEOUT_S) as harness:
            yield harness
