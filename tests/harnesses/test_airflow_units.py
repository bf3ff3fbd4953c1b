"""How the Airflow harness judges an incident's tasks (issue 28): every failed task of the
incident runs in one `dag.test()` and must pass; a fix for one of two is no fix. No Airflow
here: the judges read the task states a run reports (the real runs are in test_airflow.py and
tests/test_loop_incident.py)."""

from __future__ import annotations

from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.airflow import runner as airflow_runner
from patchit.harnesses.airflow.harness import AirflowHarness, incident_tasks, task_verdicts


def event(*related: str) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source="airflow", pipeline_id="etl", unit_id="extract", unit_path="dags/etl.py",
        context={"related_units": list(related)} if related else {},
    )  # fmt: skip


def test_the_incident_tasks_are_the_unit_and_its_related_units_once_each() -> None:
    assert incident_tasks(event()) == ["extract"]
    assert incident_tasks(event("total", "extract", "total")) == ["extract", "total"]
    command = AirflowHarness._command(event("total", "report"))
    assert command.endswith("# only extract, total and report and their upstream tasks, retries 0")


def test_the_runner_judges_each_task_and_wants_all_to_pass() -> None:
    states = {"load": "success", "extract": "success", "total": "failed"}
    units = airflow_runner.task_verdicts(states, ["extract", "total", "report"], None)
    assert units == {"extract": "success", "total": "failed", "report": "not run"}
    mapped = {"extract[0]": "success", "extract[1]": "failed", "total": "success"}
    assert airflow_runner.task_verdicts(mapped, ["extract", "total"], 0) == {
        "extract": "success", "total": "success"}  # fmt: skip
    assert airflow_runner.task_verdicts(mapped, ["extract"], None) == {"extract": "failed"}


def test_the_harness_reads_the_verdicts_or_says_no_task_ran() -> None:
    tasks = ["extract", "total"]
    ran = {"units": {"extract": "success", "total": "upstream_failed"}}
    assert task_verdicts(ran, tasks, False) == {"extract": "success", "total": "upstream_failed"}
    assert task_verdicts({"import_error": "boom"}, tasks, False) == {
        "extract": "not run", "total": "not run"}  # fmt: skip
    assert task_verdicts({"passed": True}, ["x"], True) == {"x": "success"}  # an import check
