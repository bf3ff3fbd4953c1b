"""patchit.sandbox.landlock: a fork confined to one candidate's dirs, inside bubblewrap too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.config import SandboxConfig
from patchit.sandbox.isolation import NARROWED_WRITES, make_sandbox
from patchit.sandbox.landlock import landlock_problem, restrict_writes


@pytest.fixture(autouse=True)
def _landlock() -> None:
    assert landlock_problem() is None, f"Landlock is required here ({landlock_problem()})"


def test_a_fork_writes_only_beneath_its_dirs(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir()
    other.mkdir()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        results = []
        restrict_writes([mine])
        for path in (mine / "a.txt", mine / "sub", other / "b.txt"):
            try:
                if path.suffix:
                    path.write_text("x")
                else:
                    path.mkdir()
                results.append(f"wrote {path.name}")
            except OSError as exc:
                results.append(f"refused {path.name} {exc.errno}")
        os.write(write_fd, "\n".join(results).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as answer:
        lines = answer.read().splitlines()
    os.waitpid(pid, 0)
    assert lines[:2] == ["wrote a.txt", "wrote sub"]
    assert lines[2].startswith("refused b.txt")
    assert list(other.iterdir()) == []
    (other / "parent.txt").write_text("the parent is not confined")


def test_inside_bubblewrap(tmp_path: Path) -> None:
    """A warm sandbox binds every candidate's dir; the fork narrows to its own."""
    mine, other = tmp_path / "area" / "mine", tmp_path / "area" / "other"
    box = make_sandbox(SandboxConfig(), [tmp_path / "area"], warm=True)
    mine.mkdir()
    other.mkdir()
    assert box.narrows and f"writes: {NARROWED_WRITES}" in box.describe()
    code = f"""
import os, pathlib
from patchit.sandbox.landlock import restrict_writes
restrict_writes([{str(mine)!r}])
pathlib.Path({str(mine / "ok.txt")!r}).write_text("ok")
try:
    pathlib.Path({str(other / "no.txt")!r}).write_text("escaped")
except PermissionError as exc:
    print("refused", exc)
"""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(box.wrap([sys.executable, "-c", code]), capture_output=True,
                          text=True, env=env, preexec_fn=box.preexec(), timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "refused" in proc.stdout
    assert (mine / "ok.txt").read_text() == "ok"
    assert list(other.iterdir()) == []
