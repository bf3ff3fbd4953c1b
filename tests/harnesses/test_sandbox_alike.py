"""Every process that runs candidate code is sandboxed alike (issue 29, finding 3): the
Airflow screen's fork, the Airflow and dbt verifications (warm forks and fresh runs). Hostile
code, run at import time of a DAG file or in a dbt Python model, tries to write into another
incident's worktree and scratch dir, into `$PATCHIT_HOME` and into the user's checkout, and
leaves a double-forked, `setsid` sleeper behind. Nothing may land outside, and no process may
be left once the screen or the verification has returned (the warm runtime still alive).

And the private /tmp works (finding 5): a task that writes `tempfile.gettempdir()` and a
fixed `/tmp` path verifies, and what it left there is gone before the next candidate runs.

Real Airflow, dbt, bubblewrap and Landlock: slow, and they fail (never skip) without them.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchit.config import resolve_home
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.harnesses.airflow.home import ensure_template_db
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.sandbox.isolation import bubblewrap_enforcement
from patchit.sandbox.landlock import landlock_problem
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import commit_all
from tests.harnesses.airflow_fixtures import (
    ESCAPE_DAG_FILE,
    add_escape_dag,
    airflow_event,
    make_airflow_repo,
)
from tests.harnesses.test_dbt import shop_event

pytestmark = pytest.mark.slow

# Statements: write every path of TARGETS, then leave a sleeper that double-forks and calls
# setsid (its command line carries MARKER, so the host can find it).
HOSTILE = """
import os as _os, subprocess as _sp, sys as _sys
for _path in TARGETS:
    try:
        with open(_path, "w") as _handle:
            _handle.write("sabotage")
    except OSError:
        pass
_sleeper = "import os, time\\nif os.fork():\\n    os._exit(0)\\nos.setsid()\\ntime.sleep(600)"
_sp.Popen([_sys.executable, "-c", _sleeper, MARKER], start_new_session=True)
"""


def _marked(marker: str) -> list[int]:
    """Host pids whose command line carries `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry != str(os.getpid()):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


@dataclass
class Hostile:
    """What the hostile code aims at, and how to find what it left."""

    marker: str
    targets: list[Path]

    def code(self) -> str:
        header = f"TARGETS = {[str(t) for t in self.targets]!r}\nMARKER = {self.marker!r}\n"
        return header + HOSTILE

    def check(self) -> None:
        """No target written, no sleeper alive (a kill takes a moment to show in /proc)."""
        written = [str(t) for t in self.targets if t.exists()]
        assert written == [], f"candidate code wrote outside its dirs: {written}"
        deadline = time.monotonic() + 2.0
        while (alive := _marked(self.marker)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive == [], f"candidate processes outlived their job: {alive}"


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Hostile]:
    enforcement = bubblewrap_enforcement()
    assert enforcement.problem is None and not enforcement.missing, (
        f"bubblewrap with every layer is required here ({enforcement}); CI installs it"
    )
    assert landlock_problem() is None, landlock_problem()
    home = resolve_home()
    other_worktree = worktrees_home() / "other-incident-candidate"
    other_scratch = home / "sandboxes" / "other-incident" / "candidate-1"
    for path in (other_worktree, other_scratch, home / "memory"):
        path.mkdir(parents=True)
    marker = f"patchit-stray-{uuid.uuid4().hex[:12]}"
    targets = [
        other_worktree / "sabotage.txt",
        other_scratch / "sabotage.txt",
        home / "sabotage.txt",
        home / "memory" / "sabotage.txt",
        tmp_path / "user-repo" / "sabotage.txt",
    ]
    try:
        yield Hostile(marker, targets)
    finally:
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


def _airflow_case(
    tmp_path: Path, home: Path, code_at_import: str, task_code: str, label: str = ""
) -> tuple[Path, Path, Workspace]:
    """(user repo, worktree, workspace) of a candidate whose DAG file runs `code_at_import`
    when imported and whose task runs `task_code`."""
    repo = tmp_path / "user-repo"
    if not repo.exists():
        make_airflow_repo(repo)
    incident = f"alike-airflow-{label}{uuid.uuid4().hex[:6]}"
    root = create_worktree(repo, "HEAD", worktrees_home() / f"{incident}-candidate")
    add_escape_dag(root, task_code)
    dag = root / ESCAPE_DAG_FILE
    dag.write_text(code_at_import + "\n" + dag.read_text())
    commit_all(root, "a DAG file that runs code at import")
    return repo, root, Workspace(root=root, scratch=home / "sandboxes" / incident / "c-1")


def test_the_airflow_screen_fork_writes_only_its_own_dirs_and_leaves_no_process(
    hostile: Hostile, tmp_path: Path, _patchit_home: Path
) -> None:
    ensure_template_db()
    repo, root, workspace = _airflow_case(tmp_path, _patchit_home, hostile.code(), "pass")
    try:
        event = airflow_event(repo, "escape_dag", "escape", ESCAPE_DAG_FILE)
        with AirflowHarness(warm=True) as harness:
            screening = harness.screen(workspace, event, [ESCAPE_DAG_FILE])
            assert "imported in a fork of the warm Airflow parent" in screening.check
            assert screening.passed, screening.output  # the code imports: nothing to judge
            hostile.check()  # the warm parent lives on: its namespace must not hold them
    finally:
        remove_worktree(repo, root)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_an_airflow_verification_writes_only_its_own_dirs_and_leaves_no_process(
    warm: bool, hostile: Hostile, tmp_path: Path, _patchit_home: Path
) -> None:
    ensure_template_db()
    code = hostile.code()
    repo, root, workspace = _airflow_case(tmp_path, _patchit_home, code, code)
    try:
        event = airflow_event(repo, "escape_dag", "escape", ESCAPE_DAG_FILE)
        with AirflowHarness(warm=warm) as harness:
            result = harness.verify(workspace, event)
            assert result.passed, result.output
            hostile.check()
    finally:
        remove_worktree(repo, root)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_a_dbt_python_model_writes_only_its_own_dirs_and_leaves_no_process(
    warm: bool, hostile: Hostile, shop_repo: Path, _patchit_home: Path
) -> None:
    """dbt's route to arbitrary code on DuckDB is a Python model (hooks and macros run SQL
    only): it runs in the dbt process, as the verification and the baseline run it."""
    incident = f"alike-dbt-{uuid.uuid4().hex[:6]}"
    root = create_worktree(shop_repo, "HEAD", worktrees_home() / f"{incident}-candidate")
    try:
        body = "\n".join(f"    {line}" for line in hostile.code().splitlines())
        model = f"def model(dbt, session):\n{body}\n    return session.sql('select 1 as id')\n"
        (root / "models" / "stray.py").write_text(model)
        commit_all(root, "a model that runs hostile code")
        snapshot = snapshot_database(shop_repo / "shop.duckdb", _patchit_home / "snap" / incident)
        workspace = Workspace(
            root=root,
            scratch=_patchit_home / "sandboxes" / incident / "candidate-1",
            snapshot=snapshot.parent,
        )
        with DbtHarness(warm=warm) as harness:
            result = harness.verify(workspace, shop_event(shop_repo, "model.shop.stray"))
            assert result.passed, result.output
            hostile.check()
    finally:
        remove_worktree(shop_repo, root)


# A task that writes a temp file where Python puts them and at a fixed /tmp path, after
# checking that no earlier candidate's file is left there.
TMP_TASK = """
import os, tempfile
assert not os.path.exists(LEFT), "an earlier candidate's /tmp file is still there"
with tempfile.NamedTemporaryFile("w", delete=False) as handle:
    handle.write("scratch")
with open(LEFT, "w") as handle:
    handle.write("left behind")
"""


@pytest.fixture
def home_outside_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A PATCHIT_HOME as a user has one, not under /tmp (as ~/.patchit)."""
    home = Path(tempfile.mkdtemp(prefix="patchit-home-", dir="/var/tmp"))
    monkeypatch.setenv("PATCHIT_HOME", str(home))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_a_task_writing_temp_files_verifies_and_leaves_nothing_in_tmp(
    warm: bool, tmp_path: Path, home_outside_tmp: Path
) -> None:
    assert landlock_problem() is None, landlock_problem()
    ensure_template_db()
    left = f"/tmp/patchit-left-{uuid.uuid4().hex[:8]}"
    task = f"LEFT = {left!r}\n{TMP_TASK}"
    cases = [_airflow_case(tmp_path, home_outside_tmp, "", task, f"{n}-") for n in (1, 2)]
    try:
        with AirflowHarness(warm=warm) as harness:
            for repo, _, workspace in cases:
                event = airflow_event(repo, "escape_dag", "escape", ESCAPE_DAG_FILE)
                result = harness.verify(workspace, event)
                assert result.passed, result.output
                assert result.limit_hit is None
        assert not Path(left).exists()  # the sandbox's /tmp, never the host's
    finally:
        for repo, root, _ in cases:
            remove_worktree(repo, root)


def test_a_dbt_python_model_writing_tmp_leaves_nothing_for_the_next_candidate(
    shop_repo: Path, home_outside_tmp: Path
) -> None:
    """The warm dbt worker's forks share its private /tmp: what one candidate left there is
    removed before its verification returns, so the next candidate cannot read it."""
    left = f"/tmp/patchit-left-{uuid.uuid4().hex[:8]}"
    code = f"LEFT = {left!r}\n{TMP_TASK}"
    body = "\n".join(f"    {line}" for line in code.strip().splitlines())
    model = f"def model(dbt, session):\n{body}\n    return session.sql('select 1 as id')\n"
    snapshot = snapshot_database(shop_repo / "shop.duckdb", home_outside_tmp / "snap" / "tmp")
    roots: list[Path] = []
    try:
        with DbtHarness(warm=True) as harness:
            for n in (1, 2):
                root = create_worktree(shop_repo, "HEAD", worktrees_home() / f"tmp-{n}-candidate")
                roots.append(root)
                (root / "models" / "temp_files.py").write_text(model)
                commit_all(root, "a model that writes temp files")
                workspace = Workspace(
                    root=root,
                    scratch=home_outside_tmp / "sandboxes" / "tmp" / f"candidate-{n}",
                    snapshot=snapshot.parent,
                )
                result = harness.verify(workspace, shop_event(shop_repo, "model.shop.temp_files"))
                assert result.passed, result.output
        assert not Path(left).exists()
    finally:
        for root in roots:
            remove_worktree(shop_repo, root)


def test_a_screen_the_sandbox_refused_is_left_to_verify_not_screened_out(
    hostile: Hostile, tmp_path: Path, _patchit_home: Path
) -> None:
    """Import-time code whose write outside its dirs raises: the sandbox made the import
    fail, so the screen must not record that as the candidate's certain failure (a screened
    -out diff is never tried again for its fingerprint)."""
    ensure_template_db()
    target = hostile.targets[0]  # another incident's worktree
    code = f"open({str(target)!r}, 'w').write('sabotage')\n"
    repo, root, workspace = _airflow_case(tmp_path, _patchit_home, code, "pass")
    try:
        event = airflow_event(repo, "escape_dag", "escape", ESCAPE_DAG_FILE)
        with AirflowHarness(warm=True) as harness:
            screening = harness.screen(workspace, event, [ESCAPE_DAG_FILE])
        assert not target.exists()
        assert screening.passed, screening.reason
        assert any("left to verify" in s and "write limit" in s for s in screening.skipped)
    finally:
        remove_worktree(repo, root)
