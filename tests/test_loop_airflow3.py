"""The Airflow 3 upgrade strategy in the real loop: an Airflow 2 habit in a task and in a DAG
file, each healed by `heal()` with the real Airflow harness, landing a verified branch."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.intake.airflow_scan import collect_import_errors, import_error_events
from patchit.loop.loop import Context, HealOutcome, heal
from patchit.memory import Memory
from patchit.patching.fixits.airflow3 import Airflow3UpgradeStrategy
from tests.conftest import commit_all, git
from tests.evidence.airflow3_failures import HABITS_DAG
from tests.evidence.airflow_failures import Zoo

pytestmark = pytest.mark.slow

SCHEDULE_INTERVAL_DAG = textwrap.dedent(
    """\
    from datetime import datetime

    from airflow.sdk import dag, task


    @dag(schedule_interval="@daily", start_date=datetime(2024, 1, 1), catchup=False)
    def nightly():
        @task
        def count():
            return 3

        count()


    nightly()
    """
)


def heal_with_airflow(event: UniversalFailureEvent, home: Path) -> HealOutcome:
    ctx = Context(
        home=home, memory=Memory.open(home), config=PatchitConfig(),
        strategies=[Airflow3UpgradeStrategy()], harnesses=[AirflowHarness(timeout_s=120)],
    )  # fmt: skip
    try:
        return heal(event, ctx)
    finally:
        ctx.close()


def branch_file(repo: Path, branch: str, rel: str) -> str:
    return git(repo, "show", f"{branch}:{rel}")


def test_task_reading_execution_date_lands_a_verified_branch(
    habits: Zoo, tmp_path: Path, _patchit_home: Path
) -> None:
    repo = habits.copy_repo(tmp_path / "repo")
    outcome = heal_with_airflow(habits.event_in("stamp", repo), _patchit_home)
    incident = outcome.incident
    assert incident.status == "fixed", Path(incident.report_md or "").read_text()[-3000:]
    attempts = Memory.open(_patchit_home).attempts_for(incident.id)
    assert [(a.strategy, a.outcome) for a in attempts] == [("airflow3_upgrade", "verified")]
    fixed = branch_file(repo, incident.branch or "", HABITS_DAG)
    assert 'day = context["logical_date"].strftime("%Y-%m-%d")' in fixed
    assert git(repo, "status", "--porcelain") == ""  # the user's tree is untouched


def test_dag_file_with_schedule_interval_lands_a_verified_branch(
    tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow-home"))
    repo = tmp_path / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "nightly.py").write_text(SCHEDULE_INTERVAL_DAG)
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "nightly: port from Airflow 2")
    errors = collect_import_errors(repo / "dags", _patchit_home)
    (event,) = import_error_events(errors, repo / "dags")
    assert "unexpected keyword argument 'schedule_interval'" in event.error_message
    outcome = heal_with_airflow(event, _patchit_home)
    incident = outcome.incident
    assert incident.status == "fixed", Path(incident.report_md or "").read_text()[-3000:]
    fixed = branch_file(repo, incident.branch or "", "dags/nightly.py")
    assert fixed == SCHEDULE_INTERVAL_DAG.replace("schedule_interval=", "schedule=").strip()
    assert (repo / "dags" / "nightly.py").read_text() == SCHEDULE_INTERVAL_DAG
