"""`patchit apply ID` on real git and a real SQLite memory (no dbt): a fix made on a snapshot of
uncommitted work goes into the working tree, never the index; a stale one is refused with one
line and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.delivery.apply_fix import apply_fix, changed_since, fix_of
from patchit.delivery.deliver import deliver
from patchit.errors import BadInputError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.intake.worktree_snapshot import CONTEXT_KEY, is_snapshot, snapshot_uncommitted
from patchit.memory import Memory
from tests.cli.helpers import patchit
from tests.conftest import commit_all, git

STG = "models/stg.sql"
MART = "models/mart.sql"
NEW = "models/extra.sql"


@pytest.fixture
def memory(_patchit_home: Path) -> Memory:
    return Memory.open(_patchit_home)


def fixed_on_snapshot(tmp_path: Path, memory: Memory) -> tuple[Path, str]:
    """A repository whose uncommitted rename broke a mart, and an incident fixed on a branch
    from the snapshot of that work (made the way `patchit.loop.landing.land` makes it)."""
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "dbt_project.yml").write_text("name: p\n")
    (repo / STG).write_text("select 1 as id, 'a' as name\n")
    (repo / MART).write_text("select id, name from {{ ref('stg') }}\n")
    git(repo, "init", "-q", "-b", "main")
    head = commit_all(repo, "initial")
    (repo / STG).write_text("select 1 as id, 'a' as full_name\n")  # the rename in progress
    git(repo, "add", STG)
    snap = snapshot_uncommitted(repo, repo, head)
    assert snap is not None
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="p", unit_id="model.p.mart", repo_path=str(repo),
        commit=snap.commit, context={CONTEXT_KEY: snap.as_context()},
    )  # fmt: skip
    incident = memory.create_incident(event, "fp", "ck")
    work = tmp_path / "land"
    git(repo, "worktree", "add", "-q", "--detach", str(work), snap.commit)
    (work / MART).write_text("select id, full_name from {{ ref('stg') }}\n")
    (work / NEW).write_text("select 2 as id\n")
    fix = commit_all(work, "patchit: follow the rename")
    git(repo, "worktree", "remove", "--force", str(work))
    branch = f"patchit/{incident.id}"
    git(repo, "branch", branch, fix)
    memory.transition(incident.id, "fixed", branch=branch)
    return repo, incident.id


def test_the_fix_goes_into_the_working_tree_not_the_index(tmp_path: Path, memory: Memory) -> None:
    repo, incident_id = fixed_on_snapshot(tmp_path, memory)
    index = (repo / ".git" / "index").read_bytes()
    fix = fix_of(memory.get_incident(incident_id), memory)
    assert fix.files == (NEW, MART)
    assert changed_since(fix) == []
    assert apply_fix(fix) == [NEW, MART]
    assert (repo / MART).read_text() == "select id, full_name from {{ ref('stg') }}\n"
    assert (repo / NEW).read_text() == "select 2 as id\n"
    assert (repo / STG).read_text() == "select 1 as id, 'a' as full_name\n"  # the user's work
    assert (repo / ".git" / "index").read_bytes() == index
    assert git(repo, "diff", "--cached", "--name-only") == STG  # staged: the user's own
    assert git(repo, "diff", "--name-only") == MART  # the fix: in the tree, not staged
    assert git(repo, "ls-files", "--others", "--exclude-standard") == NEW
    # applied once, the files are no longer what the fix was made against
    assert changed_since(fix) == [NEW, MART]


def test_a_stale_fix_is_refused_and_nothing_is_written(tmp_path: Path, memory: Memory) -> None:
    repo, incident_id = fixed_on_snapshot(tmp_path, memory)
    (repo / MART).write_text("select id, name, 1 as x from {{ ref('stg') }}\n")  # edited since
    before = {p: p.read_bytes() for p in (repo / "models").iterdir()}
    index = (repo / ".git" / "index").read_bytes()
    fix = fix_of(memory.get_incident(incident_id), memory)
    with pytest.raises(BadInputError, match=r"models/mart\.sql changed since the fix"):
        apply_fix(fix)
    assert {p: p.read_bytes() for p in (repo / "models").iterdir()} == before
    assert not (repo / NEW).exists() and (repo / ".git" / "index").read_bytes() == index
    # a file the fix adds that exists already is a change too
    (repo / MART).write_text("select id, name from {{ ref('stg') }}\n")
    (repo / NEW).write_text("select 3 as id\n")
    assert changed_since(fix) == [NEW]


def test_the_command_takes_a_short_id_and_says_one_line(tmp_path: Path, memory: Memory) -> None:
    repo, incident_id = fixed_on_snapshot(tmp_path, memory)
    memory.close()
    printed = patchit("apply", incident_id.split("-")[1], "--print")
    assert printed.returncode == 0, printed.stderr
    assert "+select id, full_name" in printed.stdout and "new file mode" in printed.stdout
    assert not (repo / NEW).exists()  # --print writes nothing
    (repo / MART).unlink()  # deleted since: stale
    refused = patchit("apply", incident_id.split("-")[1])
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "models/mart.sql changed since" in refused.stderr
    git(repo, "checkout", "--", MART)
    applied = patchit("apply", incident_id.split("-")[1])
    assert applied.returncode == 0, applied.stderr
    assert f"applied the fix of incident {incident_id}" in applied.stdout
    assert (repo / NEW).is_file()


def test_an_incident_without_a_fix_is_refused(tmp_path: Path, memory: Memory) -> None:
    event = UniversalFailureEvent(source=FailureSource.DBT, pipeline_id="p", unit_id="model.p.m")
    incident = memory.create_incident(event, "fp", "ck")
    with pytest.raises(BadInputError, match="no verified fix to apply"):
        fix_of(memory.get_incident(incident.id), memory)
    memory.close()
    res = patchit("apply", incident.id)
    assert res.returncode == 2 and "no verified fix" in res.stderr


def test_a_fix_of_uncommitted_work_is_never_a_pull_request(tmp_path: Path, memory: Memory) -> None:
    repo, incident_id = fixed_on_snapshot(tmp_path, memory)
    branch = f"refs/heads/patchit/{incident_id}"
    assert is_snapshot(repo, f"{branch}~1") and not is_snapshot(repo, branch)
    assert not is_snapshot(repo, "main")
    with pytest.raises(BadInputError, match="snapshot of uncommitted work"):
        deliver(incident_id, memory)
