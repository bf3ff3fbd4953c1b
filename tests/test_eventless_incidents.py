"""An incident always holds its events: a reused `event_id` (a producer's, or the same event
after its incident's window) is recorded for each incident it failed in; an incident that an
older patchit left without events is reported and skipped by `patchit track` and the worker,
never crashed on. Real SQLite files, real git, the worker and the CLI in-process and as
`python -m patchit`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from patchit.cli.main import cli
from patchit.events.model import UniversalFailureEvent
from patchit.intake.spool import Spool
from patchit.memory import Memory
from patchit.memory.fingerprint import cause_key, error_fingerprint
from patchit.worker.worker import Worker
from tests.conftest import commit_all, git
from tests.test_worker import OUTAGE, airflow_event, spool


def dbt_event(column: str, repo: Path, event_id: str = "reused") -> UniversalFailureEvent:
    return UniversalFailureEvent.model_validate(
        {
            "event_id": event_id,
            "source": "dbt",
            "pipeline_id": "shop",
            "unit_id": "model.shop.orders",
            "error_type": "Binder Error",
            "error_message": f'Referenced column "{column}" not found',
            "repo_path": str(repo),
        }
    )


def open_for(memory: Memory, event: UniversalFailureEvent) -> str:
    incident, _ = memory.open_or_attach(event, error_fingerprint(event), cause_key(event))
    return incident.id


def test_a_reused_event_id_never_leaves_an_incident_without_events(
    _patchit_home: Path, tmp_path: Path
) -> None:
    first, second = dbt_event("nme", tmp_path), dbt_event("amout", tmp_path)
    with Memory.open(_patchit_home) as memory:
        one, two = open_for(memory, first), open_for(memory, second)
        assert one != two  # two causes: two incidents
        assert [e.error_message for e in memory.events_for(one)] == [first.error_message]
        assert [e.error_message for e in memory.events_for(two)] == [second.error_message]
        assert memory.get_incident(two).events == 1
        # the same event again is recorded once, however often it comes
        assert open_for(memory, second) == two and len(memory.events_for(two)) == 1
        memory.attach_event(two, second, error_fingerprint(second), cause_key(second))
        assert len(memory.events_for(two)) == 1
        # a recurrence check of the second incident does not count the event itself
        assert not memory.has_event_from(two, "c0ffee", besides=second.event_id)


def test_reused_event_ids_in_one_batch_each_make_their_own_incident(
    _patchit_home: Path,
) -> None:
    events = [
        airflow_event("dag_a", "load", "KeyError", "'amout'", event_id="same"),
        airflow_event("dag_b", "send", "ValueError", "bad literal", event_id="same"),
    ]
    spool(_patchit_home, events)
    stats = Worker(_patchit_home).run(once=True)
    assert (stats.processed, stats.bad) == (2, 0)
    with Memory.open(_patchit_home) as memory:
        incidents = memory.list_incidents()
        assert len(incidents) == 2
        assert all(len(memory.events_for(i.id)) == 1 for i in incidents)


def eventless_fixed_incident(home: Path, repo: Path) -> str:
    """What an older patchit left: a fixed incident whose event row another incident held."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "orders.sql").write_text("select 1\n")
    commit_all(repo, "orders")
    with Memory.open(home) as memory:
        incident = open_for(memory, dbt_event("nme", repo))
        memory.db.execute("delete from events where incident_id = ?", [incident])
        memory.db.conn.commit()
        git(repo, "branch", f"patchit/{incident}")
        memory.transition(incident, "fixed", branch=f"patchit/{incident}")
    return incident


def test_track_reports_and_skips_an_incident_without_events(
    _patchit_home: Path, tmp_path: Path
) -> None:
    incident = eventless_fixed_incident(_patchit_home, tmp_path / "repo")
    result = CliRunner().invoke(cli, ["track"])
    assert result.exit_code == 0, result.output
    assert f"incident {incident}: cannot track (no event is recorded for it)" in result.output


def test_the_worker_once_and_its_daemon_go_on_past_an_incident_without_events(
    _patchit_home: Path, tmp_path: Path
) -> None:
    incident = eventless_fixed_incident(_patchit_home, tmp_path / "repo")
    spool(_patchit_home, [airflow_event("dag", "t", "OperationalError", OUTAGE)])
    once = subprocess.run(
        [sys.executable, "-m", "patchit", "worker", "--once"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert once.returncode == 0, once.stderr
    assert "Traceback" not in once.stderr
    assert f"incident {incident}: cannot track" in once.stdout + once.stderr
    with Spool.open(_patchit_home) as s:
        assert s.counts() == {"done": 1}
    # the daemon tracks while idle: it says the same and polls on
    spool(_patchit_home, [airflow_event("dag", "u", "OperationalError", OUTAGE)])
    polls: list[int] = []
    lines: list[str] = []

    def stop() -> bool:
        polls.append(1)
        return len(polls) > 6

    stats = Worker(_patchit_home, say=lines.append).run(once=False, poll_s=0.05, stop=stop)
    assert stats.processed == 1
    assert any(f"incident {incident}: cannot track" in line for line in lines), lines
