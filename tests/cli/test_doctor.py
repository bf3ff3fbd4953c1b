"""`patchit doctor` on a temp PATCHIT_HOME: healthy, damaged, and without bubblewrap."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from patchit.config import SandboxConfig
from patchit.doctor.doctor import check_bubblewrap, check_home, exit_code, run_checks
from patchit.sandbox import isolation
from patchit.sandbox.isolation import Enforcement, bubblewrap_enforcement
from tests.cli.helpers import patchit


def make_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("create table t (x)")
    conn.execute("insert into t values (1)")
    conn.commit()
    conn.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_healthy_install(_patchit_home: Path) -> None:
    make_db(_patchit_home / "memory" / "attempts.sqlite3")
    make_db(_patchit_home / "spool" / "spool.sqlite3")
    res = patchit("doctor")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    for name in ("patchit:", "python:", "bubblewrap:", "PATCHIT_HOME:", "dbt reachable:",
                 "airflow reachable:"):  # fmt: skip
        assert any(name in line for line in lines), (name, res.stdout)
    assert any(line.startswith("ok    memory/attempts.sqlite3: integrity ok") for line in lines)
    assert any(line.startswith("ok    spool/spool.sqlite3: integrity ok") for line in lines)
    assert all(line.split()[0] in ("ok", "warn", "fail") for line in lines[:-1])
    assert lines[-1].endswith("0 failed, 0 warnings"), res.stdout


def test_a_corrupt_spool_fails_and_is_left_as_it_was(_patchit_home: Path) -> None:
    spool = _patchit_home / "spool" / "spool.sqlite3"
    spool.parent.mkdir(parents=True)
    spool.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    empty = _patchit_home / "memory" / "attempts.sqlite3"
    empty.parent.mkdir(parents=True)
    empty.touch()
    before = digest(spool)
    res = patchit("doctor")
    assert res.returncode == 1, res.stdout
    line = next(x for x in res.stdout.splitlines() if "spool/spool.sqlite3" in x)
    assert line.startswith("fail"), line
    assert "move" in line and "aside" in line
    memory = next(x for x in res.stdout.splitlines() if "memory/attempts.sqlite3" in x)
    assert memory.startswith("warn") and "empty (0 bytes)" in memory
    assert digest(spool) == before  # read-only: nothing was repaired or recreated
    assert empty.stat().st_size == 0
    assert not (_patchit_home / "spool" / "spool.sqlite3-wal").exists()


def test_a_damaged_page_is_found(_patchit_home: Path) -> None:
    db = make_db(_patchit_home / "memory" / "attempts.sqlite3")
    conn = sqlite3.connect(db)
    conn.execute("create table big (x)")
    conn.executemany("insert into big values (?)", [("x" * 500,) for _ in range(200)])
    conn.execute("create index big_x on big (x)")
    conn.commit()
    conn.close()
    data = bytearray(db.read_bytes())
    data[4096 * 3 : 4096 * 3 + 200] = os.urandom(200)  # a page in the middle
    db.write_bytes(bytes(data))
    [check] = [c for c in check_home(_patchit_home) if c.name == "memory/attempts.sqlite3"]
    assert check.status == "fail", check


def test_without_bubblewrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "bwrap_path", lambda: None)
    bubblewrap_enforcement.cache_clear()
    try:
        [auto] = check_bubblewrap(SandboxConfig())
        [required] = check_bubblewrap(SandboxConfig(isolation="bubblewrap"))
    finally:
        bubblewrap_enforcement.cache_clear()
    assert auto.status == "warn" and "bwrap is not installed" in auto.detail
    assert "apt-get install bubblewrap" in auto.line()
    assert required.status == "fail"
    assert exit_code([required]) == 1


def test_a_layer_this_machine_cannot_enforce(monkeypatch: pytest.MonkeyPatch) -> None:
    partial = Enforcement(None, ("no caps", "pid ns"), (("user ns", "bwrap failed: denied"),))
    monkeypatch.setattr(
        "patchit.sandbox.isolation.bubblewrap_enforcement", lambda: partial, raising=True
    )
    checks = check_bubblewrap(SandboxConfig())
    assert checks[0].status == "ok" and "no caps, pid ns" in checks[0].detail
    assert checks[1].status == "warn" and checks[1].name == "bubblewrap user ns"
    assert "not enforced (bwrap failed: denied)" in checks[1].line()
    assert "user namespaces" in checks[1].fix


def test_the_config_is_read_from_the_repo(tmp_path: Path, _patchit_home: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".patchit.toml").write_text('[sandbox]\nisolation = "subprocess"\n')
    # a weaker sandbox is the operator's to choose: the repository's is refused alone
    res = patchit("doctor", "--repo", str(repo))
    [line] = [line for line in res.stdout.splitlines() if "[sandbox] isolation" in line]
    assert line.startswith("warn  settings: ") and "looser than the operator's 'auto'" in line
    assert "isolation = 'subprocess' in the config" not in res.stdout, res.stdout
    _patchit_home.mkdir(parents=True, exist_ok=True)
    (_patchit_home / "patchit.toml").write_text('[sandbox]\nisolation = "subprocess"\n')
    res = patchit("doctor", "--repo", str(repo))
    assert "isolation = 'subprocess' in the config" in res.stdout, res.stdout
    assert res.returncode == 0
    assert "  settings: " not in res.stdout  # nothing refused


def test_a_repository_setting_the_operators_own_is_a_warning(
    tmp_path: Path, _patchit_home: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".patchit.toml").write_text('[notify]\nwebhook_url = "http://127.0.0.1:9/x"\n')
    res = patchit("doctor", "--repo", str(repo))
    [line] = [line for line in res.stdout.splitlines() if "[notify] webhook_url" in line]
    assert line.startswith("warn  settings: ") and "set it in $PATCHIT_HOME/patchit.toml" in line
    assert "127.0.0.1:9" not in res.stdout


def test_run_checks_exits_zero_on_warnings_only(_patchit_home: Path) -> None:
    checks = run_checks(_patchit_home, SandboxConfig())
    assert exit_code(checks) == 0
    assert not (_patchit_home / "memory").exists()  # nothing was created
