"""The `patchit_heal` task's body without Airflow: a run's conf healed as the worker heals a
spooled event (real git and SQLite; the library's FakeHarness and a scripted strategy)."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

import pytest

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.fake import FakeHarness
from patchit.integrations.airflow import DISABLE_ENV
from patchit.integrations.heal_task import HealFailed, event_of_conf, heal_conf
from patchit.loop.context import Context
from patchit.memory import Memory
from tests.conftest import git
from tests.evidence.airflow_failures import init_repo, script_failure
from tests.test_loop_fast import JOB, RIGHT, SOURCE, Scripted, edit, make_ctx, user_tree


def fake_context(home: Path, repo: Path | None, **kw: Any) -> Context:
    harness = FakeHarness.passing_when(JOB, RIGHT)
    harness.handler = _checking(harness.handler)
    return make_ctx(home, kw["memory"], [Scripted([edit(RIGHT)])], [harness])


def _checking(handler: Any) -> Any:
    def verify(workspace: Any, event: UniversalFailureEvent) -> Any:
        # what a harness starts inherits it: a re-run of the user's task alerts nobody
        assert os.environ.get(DISABLE_ENV) == "1"
        return handler(workspace, event)

    return verify


@pytest.fixture
def event(tmp_path: Path) -> UniversalFailureEvent:
    return script_failure(init_repo(tmp_path / "repo"), JOB, SOURCE, "total")


def conf_of(event: UniversalFailureEvent) -> dict[str, Any]:
    return {"event": event.model_dump(mode="json")}


def test_the_task_heals_the_event_of_its_run(
    event: UniversalFailureEvent, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    before = user_tree(repo)
    lines: list[str] = []
    result = heal_conf(conf_of(event), say=lines.append, make_context=fake_context)
    assert os.environ.get(DISABLE_ENV) is None  # restored once the heal is done
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
    assert result == {"event_id": event.event_id, "incidents": [incident.id]}
    assert (incident.status, incident.branch) == ("fixed", f"patchit/{incident.id}")
    assert RIGHT in git(repo, "show", f"{incident.branch}:{JOB}")
    assert user_tree(repo) == before
    assert lines[0] == f"healing airflow:scripts:total (event {event.event_id}) with the " + (
        f"state in {_patchit_home}"
    )
    assert f"incident {incident.id}: fixed, branch patchit/{incident.id}" in lines
    assert not (_patchit_home / "spool").exists()  # the run's conf holds the event, not a spool


def test_runs_carrying_one_cause_are_one_incident(
    event: UniversalFailureEvent, _patchit_home: Path
) -> None:
    first = heal_conf(conf_of(event), make_context=fake_context)
    again = event.model_copy(update={"event_id": "e" * 32, "run_id": "scheduled__next"})
    second = heal_conf(conf_of(again), make_context=fake_context)
    assert first["incidents"] == second["incidents"]
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
    assert (incident.status, incident.events, incident.attempts) == ("fixed", 2, 1)


def test_an_event_given_as_the_whole_conf_is_healed_too(
    event: UniversalFailureEvent, _patchit_home: Path
) -> None:
    result = heal_conf(event.model_dump(mode="json"), make_context=fake_context)
    assert len(result["incidents"]) == 1


@pytest.mark.parametrize("conf", [None, {}, {"event": "x"}, {"other": 1}, [1]])
def test_a_run_without_an_event_fails_saying_what_to_send(conf: Any) -> None:
    with pytest.raises(BadInputError, match=r'trigger the heal DAG with conf \{"event"'):
        event_of_conf(conf)


def test_an_invalid_event_fails_the_task(_patchit_home: Path) -> None:
    with pytest.raises(
        BadInputError, match=r"dag_run\.conf event: does not match the event schema"
    ):
        heal_conf({"event": {"source": "airflow"}}, make_context=fake_context)


def test_an_event_the_worker_cannot_process_fails_the_task(
    event: UniversalFailureEvent, _patchit_home: Path
) -> None:
    def broken(home: Path, repo: Path | None, **kw: Any) -> Context:
        raise BadInputError("no harness for this repository")

    with pytest.raises(HealFailed, match=r"could not be processed: .*no harness for this"):
        heal_conf(conf_of(event), make_context=broken)
    assert os.environ.get(DISABLE_ENV) is None


def test_a_storm_of_heal_runs_of_one_cause_is_one_incident(
    event: UniversalFailureEvent, _patchit_home: Path
) -> None:
    """Four heal tasks at once (max_active_runs=4 on four executor slots), one cause."""
    start = mp.get_context("fork").Barrier(4)

    def slow_context(home: Path, repo: Path | None, **kw: Any) -> Context:
        def handler(workspace: Any, ev: UniversalFailureEvent) -> bool:
            time.sleep(0.5)  # the others arrive while this one verifies
            return RIGHT in (workspace.root / JOB).read_text()

        return make_ctx(home, kw["memory"], [Scripted([edit(RIGHT)])], [FakeHarness(handler)])

    def one_run(n: int) -> None:
        start.wait(30)
        copy = event.model_copy(update={"event_id": f"{n:032x}", "run_id": f"manual__{n}"})
        heal_conf(conf_of(copy), say=lambda _line: None, make_context=slow_context)

    procs = [mp.get_context("fork").Process(target=one_run, args=(n,)) for n in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
    assert (incident.status, incident.events, incident.attempts) == ("fixed", 4, 1)


def test_a_repository_missing_on_this_worker_fails_the_task(
    event: UniversalFailureEvent, tmp_path: Path, _patchit_home: Path
) -> None:
    elsewhere = event.model_copy(update={"repo_path": str(tmp_path / "not-here")})
    with pytest.raises(HealFailed, match=r"repository .*not-here is not on this worker; clear "
                       r"the run on a worker that has it, or map it"):  # fmt: skip
        heal_conf(conf_of(elsewhere), make_context=fake_context)
    assert os.environ.get(DISABLE_ENV) is None
