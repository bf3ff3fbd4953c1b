"""`patchit doctor` tries what the state dir needs: a write to the memory (a locked one is a
failure), free space (a real full tmpfs), and a sandboxed child that cannot read the host's
secrets nor `$PATCHIT_HOME`, wherever it is (directly under `/`, inside the user's checkout)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.config import SandboxConfig
from patchit.doctor.home import check_free_space, check_secrets_hidden, check_writable
from tests.cli.helpers import patchit
from tests.full_disk import fill, mount_tmpfs

HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA locking_mode=EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("insert into t values (2)")
print("locked", flush=True)
time.sleep(120)
"""


def make_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("create table t (x)")
    conn.execute("insert into t values (1)")
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def locked_memory(_patchit_home: Path) -> Iterator[Path]:
    """The memory DB, held under an exclusive lock by another (real) process."""
    db = make_db(_patchit_home / "memory" / "attempts.sqlite3")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(db)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield db
    finally:
        holder.kill()
        holder.wait()


def test_a_memory_locked_by_another_process_is_a_failure_with_what_to_do(
    locked_memory: Path, _patchit_home: Path
) -> None:
    res = patchit("doctor")
    assert res.returncode == 1, res.stdout
    [line] = [x for x in res.stdout.splitlines() if "attempts.sqlite3 writable" in x]
    assert line.startswith("fail") and "locked by another process" in line, line
    assert f"fuser {locked_memory}" in line


def test_a_memory_that_takes_a_write_is_ok_and_unchanged(_patchit_home: Path) -> None:
    db = make_db(_patchit_home / "memory" / "attempts.sqlite3")
    before = db.read_bytes()
    check = check_writable(db, _patchit_home)
    assert check is not None and check.status == "ok", check
    assert db.read_bytes() == before


def test_a_full_home_is_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with mount_tmpfs(tmp_path / "small", 512) as mounted:
        if mounted is None:
            pytest.skip(
                "machine feature: a tmpfs mount needs root (CI runs as root); "
                "nothing to install. The threshold test below still runs"
            )
        fill(mounted)
        monkeypatch.setenv("PATCHIT_HOME", str(mounted / "home"))
        res = patchit("doctor")
    assert res.returncode == 1, res.stdout
    [line] = [x for x in res.stdout.splitlines() if "free space:" in x]
    assert line.startswith("fail  free space: 0 MB free"), line
    assert "callback cannot keep failures" in line and "fix:" in line


def test_free_space_below_the_threshold_fails(tmp_path: Path) -> None:
    free_mb = shutil.disk_usage(tmp_path).free // (1024 * 1024)
    assert check_free_space(tmp_path / "not-yet", min_free_mb=free_mb + 1024).status == "fail"
    assert check_free_space(tmp_path / "not-yet", min_free_mb=1).status == "ok"


@pytest.fixture(params=["under /", "in the checkout"])
def home(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[Path]:  # fmt: skip
    """A PATCHIT_HOME where the probe found it readable: directly under / (`/phome-...`), and
    inside the user's checkout (outside /tmp, which the sandbox replaces anyway)."""
    if request.param == "under /":
        path = Path(f"/phome-{uuid.uuid4().hex[:8]}")
    else:
        path = Path(f"/var/tmp/checkout-{uuid.uuid4().hex[:8]}/var/patchit")
    path.mkdir(parents=True)
    monkeypatch.setenv("PATCHIT_HOME", str(path))
    try:
        yield path
    finally:
        shutil.rmtree(path if request.param == "under /" else path.parent.parent)


def test_patchit_home_is_hidden_from_the_sandbox_wherever_it_is(home: Path) -> None:
    db = make_db(home / "memory" / "attempts.sqlite3")
    [check] = check_secrets_hidden(home, SandboxConfig())
    assert check.status == "ok", check.line()
    assert str(db) in check.detail and "/etc/shadow" in check.detail
    assert sorted(p.name for p in home.iterdir()) == ["memory"]  # the canary is gone
    res = patchit("doctor")
    [line] = [x for x in res.stdout.splitlines() if "host secrets:" in x]
    assert line.startswith("ok    host secrets: hidden"), res.stdout
