"""The dbt wrapper's healing policy, in the library (`patchit.worker.dbt_wrapper`), without dbt."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from patchit.loop.loop import project_key_for
from patchit.memory import Memory
from patchit.text.dbt_args import is_full_build
from patchit.worker.dbt_wrapper import DbtRun, heal_dbt_run

STARTED = datetime(2026, 11, 26, tzinfo=UTC)


@pytest.mark.parametrize(
    ("args", "full"),
    [
        (["build"], True),
        (["build", "--project-dir", "p", "--target", "dev"], True),
        (["--no-partial-parse", "build"], True),
        (["build", "--select", "orders+"], False),
        (["build", "-s=orders"], False),
        (["build", "--exclude", "x"], False),
        (["run"], False),
        (["test"], False),
    ],
)
def test_only_a_whole_project_build_is_full(args: list[str], full: bool) -> None:
    assert is_full_build(args) is full


def run_of(tmp_path: Path, code: int, args: list[str], **kw: object) -> DbtRun:
    fields: dict[str, object] = {
        "exit_code": code, "record": {}, "args": args, "project": tmp_path / "shop",
        "repo": tmp_path, "commit": "a" * 40, "started": STARTED, **kw,
    }  # fmt: skip
    return DbtRun(**fields)  # type: ignore[arg-type]


def test_a_green_full_build_on_a_clean_tree_is_the_last_good_commit(
    tmp_path: Path, _patchit_home: Path
) -> None:
    said: list[str] = []
    with Memory.open(_patchit_home) as memory:
        key = project_key_for(tmp_path, tmp_path / "shop")
        heal_dbt_run(run_of(tmp_path, 0, ["build", "-s", "x"]), _patchit_home, memory, said.append)
        heal_dbt_run(run_of(tmp_path, 0, ["build"], dirty=["m.sql"]), _patchit_home, memory,
                     said.append)  # fmt: skip
        assert memory.last_good(key) is None
        heal_dbt_run(run_of(tmp_path, 0, ["build"]), _patchit_home, memory, said.append)
        assert memory.last_good(key) == "a" * 40
    assert said == []


def test_nothing_to_heal_is_said_once_and_heals_nothing(
    tmp_path: Path, _patchit_home: Path
) -> None:
    said: list[str] = []
    with Memory.open(_patchit_home) as memory:
        usage = run_of(tmp_path, 2, ["bild"], record={"usage_error": True})
        assert heal_dbt_run(usage, _patchit_home, memory, said.append) == []
        assert heal_dbt_run(run_of(tmp_path, 2, ["build"]), _patchit_home, memory,
                            said.append) == []  # fmt: skip
        assert memory.list_incidents() == []
    assert said == ["dbt exited 2 without a result patchit could read; nothing to heal"]


def test_uncommitted_work_heals_only_through_its_snapshot(tmp_path: Path) -> None:
    work = {"snapshot": "b" * 40, "base": "a" * 40, "files": ["models/m.sql"]}
    assert run_of(tmp_path, 1, ["build"]).heals()
    assert not run_of(tmp_path, 1, ["build"], dirty=["models/m.sql"]).heals()  # no snapshot
    snapshotted = run_of(tmp_path, 1, ["build"], dirty=["models/m.sql"], uncommitted=work)
    assert snapshotted.heals()
    assert not run_of(tmp_path, 1, ["build"], no_heal=True, uncommitted=work).heals()


def test_the_spool_ticket_carries_the_snapshot_to_the_events(tmp_path: Path) -> None:
    import json
    import os

    from patchit.intake.dbt_child_env import SPOOL_ENV
    from patchit.intake.dbt_spool import spool_ticket, take_ticket
    from patchit.intake.worktree_snapshot import snapshot_of

    work = {"snapshot": "b" * 40, "base": "a" * 40, "files": ["models/m.sql"]}
    project = tmp_path / "shop"
    project.mkdir()
    (project / "dbt_project.yml").write_text("name: shop\n")
    plain = spool_ticket(tmp_path, "me", project, tmp_path, "a" * 40, STARTED)
    assert "uncommitted" not in json.loads(plain)
    os.environ[SPOOL_ENV] = spool_ticket(tmp_path, "me", project, tmp_path, "b" * 40, STARTED,
                                         work)  # fmt: skip
    ticket = take_ticket()
    assert ticket is not None and json.loads(ticket["uncommitted"]) == work
    from patchit.intake.dbt import events_from_run

    record = {"results": [{"unique_id": "model.shop.m", "status": "error", "message": "boom"}]}
    [event] = events_from_run(record, ["build"], project, tmp_path, "b" * 40, STARTED, work)
    snapshot = snapshot_of(event)
    assert snapshot is not None and snapshot.commit == event.commit == "b" * 40
    assert snapshot.files == ("models/m.sql",)
