"""Harnesses are found through the entry-point group and chosen per event: override, then
the platform of the event, changed files and a compose stack (registry docstring)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchit.config import PatchitConfig, SandboxConfig
from patchit.errors import BadInputError, HarnessError, PatchitWarning
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.airflow.compose import ComposeHarness
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.harnesses.base import Harness
from patchit.harnesses.ci import CiHarness
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.harnesses.python import PythonHarness
from patchit.harnesses.registry import (
    changed_files,
    configure_harnesses,
    inference_order,
    load_harnesses,
    select_harness,
)
from tests.conftest import ROOT, commit_all
from tests.harnesses.python_fixtures import make_python_repo


def test_builtin_dbt_harness_is_an_entry_point() -> None:
    harnesses = load_harnesses()
    dbt = [h for h in harnesses if h.name == "dbt"]
    assert len(dbt) == 1 and isinstance(dbt[0], DbtHarness)
    assert all(isinstance(h, Harness) for h in harnesses)
    assert dbt[0].worker_pid is None  # loading never starts a worker


def test_select_harness_by_inference_and_override(tmp_path: Path) -> None:
    harnesses: list[Harness] = [DbtHarness()]
    dbt_event = UniversalFailureEvent(source="dbt", pipeline_id="shop", unit_id="model.shop.a")
    assert select_harness(dbt_event, tmp_path, harnesses).name == "dbt"
    assert select_harness(dbt_event, tmp_path, harnesses, override="dbt").name == "dbt"
    with pytest.raises(BadInputError, match="'airflow' is not installed"):
        select_harness(dbt_event, tmp_path, harnesses, override="airflow")

    task = UniversalFailureEvent(source="airflow", pipeline_id="etl", unit_id="load")
    with pytest.raises(HarnessError, match="no installed harness"):
        select_harness(task, tmp_path, harnesses)
    (tmp_path / "dbt_project.yml").write_text("name: shop\n")  # a dbt project run by Airflow
    assert select_harness(task, tmp_path, harnesses).name == "dbt"


def all_harnesses() -> list[Harness]:
    return [AirflowHarness(), CiHarness(), ComposeHarness(), DbtHarness(), PythonHarness()]


def event(
    source: str, repo: Path, unit_id: str = "unit", **fields: object
) -> UniversalFailureEvent:
    return UniversalFailureEvent.model_validate(
        {"source": source, "pipeline_id": "p", "unit_id": unit_id, "repo_path": str(repo),
         **fields}
    )  # fmt: skip


def test_every_builtin_harness_is_an_entry_point() -> None:
    names = [h.name for h in load_harnesses()]
    assert {"airflow", "ci", "compose", "dbt", "python"} <= set(names)
    assert names == sorted(names)


@pytest.mark.slow  # docker
def test_the_platform_of_the_event_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    repo = make_python_repo(tmp_path / "repo")
    harnesses = all_harnesses()
    assert select_harness(event("python", repo), repo, harnesses).name == "python"
    assert select_harness(event("ci", repo, "test"), repo, harnesses).name == "ci"
    assert select_harness(event("dbt", repo), repo, harnesses).name == "dbt"
    assert select_harness(event("airflow", repo), repo, harnesses).name == "airflow"
    # A compose stack with Airflow in it comes first for Airflow, but only with an engine.
    shutil.copyfile(ROOT / "docker-compose.dev.yml", repo / "docker-compose.dev.yml")
    assert inference_order(event("airflow", repo), repo) == ["compose", "airflow", "dbt"]
    assert select_harness(event("airflow", repo), repo, harnesses).name == "airflow"
    # No workflow files and no configured commands: nothing can re-run a CI job.
    shutil.rmtree(repo / ".github")
    with pytest.raises(HarnessError, match="no installed harness can re-run"):
        select_harness(event("ci", repo, "test"), repo, harnesses)
    assert select_harness(event("ci", repo), repo, [CiHarness(commands=["make"])]).name == "ci"


def test_changed_files_put_dbt_first_for_an_airflow_task(tmp_path: Path) -> None:
    repo = make_python_repo(tmp_path / "repo")
    (repo / "models").mkdir()
    (repo / "models" / "orders.sql").write_text("select 1 as id\n")
    sql_commit = commit_all(repo, "orders model")
    (repo / "dags").mkdir()
    (repo / "dags" / "etl.py").write_text("# the DAG\n")
    dag_commit = commit_all(repo, "etl dag")

    by_sql = event("airflow", repo, commit=sql_commit)
    assert changed_files(by_sql, repo) == ["models/orders.sql"]
    assert inference_order(by_sql, repo) == ["dbt", "compose", "airflow"]
    by_dag = event("airflow", repo, commit=dag_commit)
    assert inference_order(by_dag, repo) == ["compose", "airflow", "dbt"]
    # A task whose file is a DAG stays with Airflow whatever else its commit touched.
    mixed = event("airflow", repo, commit=sql_commit, unit_path="dags/etl.py")
    assert inference_order(mixed, repo)[0] == "compose"
    unknown = event("airflow", repo, commit="0" * 40, context={"changed_files": ["seeds/a.csv"]})
    assert inference_order(unknown, repo)[0] == "dbt"
    (repo / "dbt_project.yml").write_text("name: shop\n")
    assert select_harness(by_sql, repo, all_harnesses()).name == "dbt"
    assert select_harness(by_dag, repo, all_harnesses()).name == "airflow"


def test_config_forces_a_harness(tmp_path: Path) -> None:
    repo = make_python_repo(tmp_path / "repo")
    harnesses = all_harnesses()
    dbt_event = event("dbt", repo)
    assert select_harness(dbt_event, repo, harnesses, config=SandboxConfig(harness="ci")).name == (
        "ci"
    )
    (repo / ".patchit.toml").write_text('[sandbox]\nharness = "python"\n')
    assert select_harness(dbt_event, repo, harnesses).name == "python"
    assert select_harness(dbt_event, repo, harnesses, override="dbt").name == "dbt"
    (repo / ".patchit.toml").write_text('[sandbox]\nharness = "kubernetes"\n')
    with pytest.raises(BadInputError, match=r"'kubernetes' is not installed .*\.patchit\.toml"):
        select_harness(dbt_event, repo, harnesses)


def test_configure_harnesses_applies_limits_sandbox_and_ci_commands() -> None:
    config = PatchitConfig.model_validate(
        {
            "loop": {"harness_timeout_s": 42},
            "sandbox": {"network": True, "memory_mb": 512, "ci_commands": ["make lint"]},
        }
    )
    dbt, ci = configure_harnesses([DbtHarness(warm=False), CiHarness()], config)
    assert isinstance(dbt, DbtHarness) and isinstance(ci, CiHarness)
    assert dbt.timeout_s == ci.timeout_s == 42
    assert dbt.sandbox.network and dbt.sandbox.memory_mb == 512
    assert ci.commands == ["make lint"]
    # without configured commands the ci harness keeps reading the workflow files
    (plain,) = configure_harnesses([CiHarness()], PatchitConfig())
    assert isinstance(plain, CiHarness) and plain.commands == []


def test_a_broken_harness_plugin_is_skipped_with_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import patchit.plugins as registry

    real = registry.entry_points

    class _Point:
        def __init__(self, name: str, value: str, target: object) -> None:
            self.name, self.value, self.target = name, value, target

        def load(self) -> object:
            if isinstance(self.target, Exception):
                raise self.target
            return self.target

    class _NoConfigure:  # the old protocol: no configure/warm_up
        name = "old"

        def applies_to(self, event: object, repo: object) -> bool:
            return True

    def fake_entry_points(group: str) -> list[object]:
        broken = _Point("dagster", "patchit_dagster:DagsterHarness", ImportError("no dagster"))
        return [*real(group=group), broken, _Point("old", "old:Old", _NoConfigure)]

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    with pytest.warns(PatchitWarning) as caught:
        harnesses = load_harnesses()
    messages = [str(w.message) for w in caught]
    assert any("'dagster'" in m and "no dagster" in m for m in messages), messages
    assert any("'old'" in m and "is not a Harness" in m for m in messages), messages
    assert "dbt" in {h.name for h in harnesses} and "old" not in {h.name for h in harnesses}
