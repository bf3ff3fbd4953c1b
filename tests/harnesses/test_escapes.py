"""Each sandbox escape found as root (issue 12), tried by user code run through the real dbt
and Airflow harnesses: a dbt Python model and an Airflow task that try to remount `/`
read-write and unmount the private /tmp, write a host file, the shared cache or another
incident's worktree, read patchit's memory or /etc/shadow, list /root, see and SIGSTOP a
host process, and find a secret planted in patchit's own environment (its own environ,
/proc/<ppid>/environ, any /proc/*/environ).
Every attempt must fail, the host must be untouched, and the verification itself must still
pass, saying what the sandbox enforced.

These need bubblewrap and fail (never skip) without it: CI installs it (`make test`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.sandbox.isolation import bubblewrap_enforcement
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

SECRET_NAME = "WAREHOUSE_PASSWORD"  # never named by the unit's code: it must not get it
ATTEMPTS = ("remount", "write_host_file", "write_cache", "write_other_candidate", "read_memory",
            "read_shadow", "list_root", "see_host_process", "signal_host_process",
            "secret_in_env", "secret_in_proc")  # fmt: skip

# The attempts, as the body of a function; the placeholders are filled in per test.
ESCAPE_CODE = """
import json, os, signal, subprocess
report = {}
def attempt(name, fn):
    try:
        report[name] = ["succeeded", repr(fn())[:300]]
    except BaseException as exc:
        report[name] = ["failed", (type(exc).__name__ + ": " + str(exc))[:300]]
def remount():
    run = subprocess.run(["sh", "-c", "mount -o remount,bind,rw / && umount -l /tmp"],
                         capture_output=True, text=True)
    if run.returncode:
        raise OSError(run.stderr.strip())
    return run.stdout
attempt("remount", remount)
def write(path):
    with open(path, "w") as handle:
        handle.write("escaped")
    return path
attempt("write_host_file", lambda: write(HOST_FILE))
attempt("write_cache", lambda: write(CACHE_FILE))
attempt("write_other_candidate", lambda: write(OTHER_FILE))
attempt("read_memory", lambda: open(MEMORY_FILE, "rb").read())
def read_shadow():
    text = open("/etc/shadow").read()
    if not text:
        raise OSError("/etc/shadow reads empty")
    return text
attempt("read_shadow", read_shadow)
def list_root():
    names = os.listdir("/root")
    if ROOT_PLANT not in names:
        raise OSError("the planted file is not there: " + repr(names))
    return names
attempt("list_root", list_root)
def host_pids():
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if MARKER in open("/proc/%s/cmdline" % pid).read():
                    found.append(int(pid))
            except OSError:
                pass
    return found
def see():
    found = host_pids()
    if not found:
        raise OSError("no process runs " + MARKER)
    return found
attempt("see_host_process", see)
def stop():
    for pid in set(host_pids() + [HOST_PID]):
        os.kill(pid, signal.SIGSTOP)
attempt("signal_host_process", stop)
def in_env():
    hits = [name for name, value in os.environ.items() if SECRET in value]
    if not hits:
        raise OSError("not in the environment")
    return hits
attempt("secret_in_env", in_env)
def in_proc():
    hits = []
    for pid in ["self", str(os.getppid()), *os.listdir("/proc")]:
        try:
            if SECRET.encode() in open("/proc/%s/environ" % pid, "rb").read():
                hits.append(pid)
        except OSError:
            pass
    if not hits:
        raise OSError("in no readable /proc/*/environ")
    return hits
attempt("secret_in_proc", in_proc)
with open(REPORT, "w") as handle:
    json.dump(report, handle)
"""


@dataclass
class Host:
    """What the host plants for the child to find: a sleeping process, a secret in the
    environment, a file in /root, a dir it may not write."""

    sleeper: subprocess.Popen[bytes]
    marker: str
    secret: str
    root_plant: Path
    outside: Path
    other: Path  # another incident's worktree, in the same $PATCHIT_HOME

    def code(self, report: Path) -> str:
        values = {
            "HOST_FILE": str(self.outside / "escaped.txt"),
            "CACHE_FILE": str(resolve_home() / "cache" / "escaped.txt"),
            "OTHER_FILE": str(self.other / "escaped.txt"),
            "MEMORY_FILE": str(resolve_home() / "memory" / "attempts.sqlite3"),
            "ROOT_PLANT": self.root_plant.name,
            "MARKER": self.marker,
            "HOST_PID": self.sleeper.pid,
            "SECRET": self.secret,
            "REPORT": str(report),
        }
        header = "".join(f"{name} = {value!r}\n" for name, value in values.items())
        return header + ESCAPE_CODE

    def check(self, result: Verification, report: Path) -> None:
        """Every attempt failed, the host is untouched, the verification passed and says
        what was enforced."""
        assert result.passed, result.output
        assert result.isolation.startswith("bubblewrap (user ns, no caps, pid ns, no network")
        assert "env allowlist" in result.isolation and "not enforced" not in result.isolation
        assert "writes: its worktree and scratch" in result.isolation
        attempts = json.loads(report.read_text())
        assert sorted(attempts) == sorted(ATTEMPTS)
        succeeded = {name: why for name, (status, why) in attempts.items() if status != "failed"}
        assert succeeded == {}, attempts
        assert list(self.outside.iterdir()) == []
        assert not (resolve_home() / "cache" / "escaped.txt").exists()
        assert list(self.other.iterdir()) == []
        state = Path(f"/proc/{self.sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state != "T", "the host process was stopped"
        assert self.secret not in result.output


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    enforcement = bubblewrap_enforcement()
    assert enforcement.problem is None and not enforcement.missing, (
        f"bubblewrap with every layer is required here ({enforcement}); CI installs it"
    )
    marker = f"{7200 + os.getpid() % 1000}.{uuid.uuid4().int % 10_000}"
    sleeper = subprocess.Popen(["sleep", marker])
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    monkeypatch.setenv(SECRET_NAME, secret)
    root_plant = Path("/root") / f"patchit-escape-{uuid.uuid4().hex[:8]}"
    root_plant.write_text("host secret")
    outside = Path(tempfile.mkdtemp(prefix="patchit-outside-", dir="/var/tmp"))
    (resolve_home() / "cache").mkdir(parents=True, exist_ok=True)
    other = worktrees_home() / "other-incident-candidate"
    other.mkdir(parents=True)
    memory = resolve_home() / "memory" / "attempts.sqlite3"
    memory.parent.mkdir(parents=True)
    memory.write_text("incidents")
    try:
        yield Host(sleeper, marker, secret, root_plant, outside, other)
    finally:
        sleeper.kill()
        sleeper.wait()
        root_plant.unlink()
        shutil.rmtree(outside)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_dbt_python_model_cannot_escape(
    warm: bool, host: Host, shop_repo: Path, _patchit_home: Path
) -> None:
    incident = f"escape-dbt-{uuid.uuid4().hex[:6]}"
    root = create_worktree(shop_repo, "HEAD", worktrees_home() / f"{incident}-candidate")
    try:
        report = root / "escape_report.json"
        body = "\n".join(f"    {line}" for line in host.code(report).splitlines())
        model = f"def model(dbt, session):\n{body}\n    return session.sql('select 1 as id')\n"
        (root / "models" / "escape.py").write_text(model)
        commit_all(root, "a model that tries to escape")
        snapshot = snapshot_database(shop_repo / "shop.duckdb", _patchit_home / "snap" / incident)
        workspace = Workspace(
            root=root,
            scratch=_patchit_home / "sandboxes" / incident / "candidate-1",
            snapshot=snapshot.parent,
        )
        with DbtHarness(warm=warm) as harness:
            result = harness.verify(workspace, shop_event(shop_repo, "model.shop.escape"))
        host.check(result, report)
    finally:
        remove_worktree(shop_repo, root)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_airflow_task_cannot_escape(
    warm: bool, host: Host, tmp_path: Path, _patchit_home: Path
) -> None:
    ensure_template_db()
    repo = make_airflow_repo(tmp_path / "user-repo")
    incident = f"escape-airflow-{uuid.uuid4().hex[:6]}"
    root = create_worktree(repo, "HEAD", worktrees_home() / f"{incident}-candidate")
    try:
        report = root / "escape_report.json"
        add_escape_dag(root, host.code(report))
        workspace = Workspace(root=root, scratch=_patchit_home / "sandboxes" / incident / "c-1")
        event = airflow_event(repo, "escape_dag", "escape", ESCAPE_DAG_FILE)
        started = time.monotonic()
        with AirflowHarness(warm=warm) as harness:
            result = harness.verify(workspace, event)
        host.check(result, report)
        assert time.monotonic() - started < 300
    finally:
        remove_worktree(repo, root)
