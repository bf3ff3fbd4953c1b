"""patchit.sandbox.isolation with the real bwrap: what a sandboxed child can and cannot do.

These tests need bubblewrap and fail (never skip) without it: CI installs it (`make test`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.config import SandboxConfig
from patchit.errors import HarnessError
from patchit.fidelity.model import DataCheck
from patchit.harnesses.warm import WarmProcess, kill_process_group, popen_sandboxed
from patchit.sandbox.envrefs import names_in_text, referenced_env_names
from patchit.sandbox.isolation import (
    Sandbox,
    _within,
    allowed_env,
    bubblewrap_problem,
    detect_limit,
    make_sandbox,
    patchit_areas,
)


def require_bwrap() -> None:
    problem = bubblewrap_problem()
    assert problem is None, (
        f"bubblewrap is required here ({problem}): apt-get install bubblewrap (CI installs it)"
    )


def run_in(box: Sandbox, code: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        box.wrap([sys.executable, "-c", code]), preexec_fn=box.preexec(),
        capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    require_bwrap()
    return make_sandbox(SandboxConfig(memory_mb=512), [tmp_path / "work"])


@pytest.fixture
def outside() -> Iterator[Path]:
    """A dir outside /tmp (the sandbox hides /tmp entirely) that the sandbox may not write."""
    path = Path(tempfile.mkdtemp(prefix="patchit-outside-", dir="/var/tmp"))
    yield path
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


class TestDescribeAndWrap:
    def test_subprocess_leaves_the_command_alone(self, tmp_path: Path) -> None:
        box = make_sandbox(SandboxConfig(isolation="subprocess"), [tmp_path / "w"])
        assert box.kind == "subprocess"
        assert box.wrap(["dbt", "build"]) == ["dbt", "build"]
        assert box.describe() == (
            "subprocess (4096 MB, env allowlist; not enforced: network, writes, user ns, caps, "
            "pid ns, host secrets)"
        )
        assert (tmp_path / "w").is_dir()

    def test_bubblewrap_command_line(self, box: Sandbox, tmp_path: Path) -> None:
        argv = box.wrap(["python", "-V"])
        assert argv[0].endswith("bwrap")
        assert argv[-3:] == ["--", "python", "-V"]
        text = " ".join(argv)
        assert "--ro-bind / /" in text
        assert "--tmpfs /tmp" in text
        assert "--unshare-net" in text
        flags = ["--unshare-user", "--cap-drop ALL", "--unshare-pid", "--die-with-parent",
                 "--new-session", "--tmpfs /root", "--ro-bind /dev/null /etc/shadow"]  # fmt: skip
        for flag in flags:
            assert flag in text
        assert f"--bind {tmp_path / 'work'} {tmp_path / 'work'}" in text
        assert box.describe() == (
            "bubblewrap (user ns, no caps, pid ns, no network, env allowlist, host secrets "
            "hidden, 512 MB, private /tmp, writes: its worktree and scratch)"
        )

    def test_network_when_asked(self, tmp_path: Path) -> None:
        require_bwrap()
        box = make_sandbox(SandboxConfig(network=True), [tmp_path])
        assert "--unshare-net" not in box.wrap(["true"])
        assert "network allowed, env allowlist" in box.describe()
        assert not box.blocks_network

    def test_writable_dirs_are_created_and_deduplicated(self, tmp_path: Path) -> None:
        require_bwrap()
        box = make_sandbox(SandboxConfig(), [tmp_path / "a" / "b", tmp_path / "a", tmp_path / "c"])
        assert box.writable == (tmp_path / "a", tmp_path / "c")
        assert box.covers(tmp_path / "a" / "b" / "new", tmp_path / "c")
        assert not box.covers(tmp_path / "d")

    def test_patchit_areas_are_the_homes_own_dirs(self, _patchit_home: Path) -> None:
        names = [p.relative_to(_patchit_home).as_posix() for p in patchit_areas()]
        assert names == ["worktrees", "sandboxes"]  # never the cache, memory or spool

    def test_bubblewrap_required_but_missing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
        bubblewrap_problem.cache_clear()
        try:
            with pytest.raises(HarnessError, match="apt-get install bubblewrap"):
                make_sandbox(SandboxConfig(isolation="bubblewrap"), [tmp_path])
            fallback = make_sandbox(SandboxConfig(), [tmp_path])
        finally:
            bubblewrap_problem.cache_clear()
        assert fallback.kind == "subprocess"
        assert fallback.describe().endswith(": bwrap is not installed")


class TestDetectLimit:
    @pytest.mark.parametrize(
        ("output", "limit"),
        [
            ("Traceback ...\nMemoryError", "memory"),
            ("Out of Memory Error: could not allocate block of size 256 KiB", "memory"),
            ("OSError: [Errno 101] Network is unreachable", "network"),
            ("socket.gaierror: [Errno -3] Temporary failure in name resolution", "network"),
            ("ConnectionRefusedError: [Errno 111] Connection refused", "network"),
            ("OSError: [Errno 30] Read-only file system: '/etc/x'", "write"),
            ('Binder Error: Referenced column "nme" not found', None),
            ("KeyError: 'curency'", None),
        ],
    )
    def test_names_the_limit(self, output: str, limit: str | None) -> None:
        assert detect_limit(output) == limit

    def test_only_limits_the_sandbox_imposes(self, tmp_path: Path) -> None:
        plain = make_sandbox(SandboxConfig(isolation="subprocess"), [tmp_path])
        assert plain.limit_in("[Errno 101] Network is unreachable") is None
        assert plain.limit_in("[Errno 30] Read-only file system") is None
        assert plain.limit_in("MemoryError") == "memory"


class TestEscapesAreStopped:
    def test_writes_only_in_the_writable_dirs(
        self, box: Sandbox, tmp_path: Path, outside: Path
    ) -> None:
        code = f"""
import pathlib
pathlib.Path({str(tmp_path / "work" / "ok.txt")!r}).write_text("ok")
for target in ({str(outside / "escape.txt")!r}, {str(tmp_path / "escape.txt")!r}):
    try:
        pathlib.Path(target).write_text("escaped")
        print("wrote", target)
    except OSError as exc:
        print("refused", target, exc)
"""
        proc = run_in(box, code)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "work" / "ok.txt").read_text() == "ok"
        assert list(outside.iterdir()) == []
        # /tmp is private: the test's own tmp dir is not even visible in the sandbox
        assert not (tmp_path / "escape.txt").exists()
        assert f"refused {outside / 'escape.txt'}" in proc.stdout
        assert box.limit_in(proc.stdout) == "write"

    def test_cannot_open_a_socket(
        self, box: Sandbox, tmp_path: Path, listener: tuple[int, list[bytes]]
    ) -> None:
        port, received = listener
        code = f"""
import socket
for host in HOSTS:
    try:
        socket.create_connection((host, {port}), timeout=5).sendall(b"escaped")
        print("connected", host)
    except OSError as exc:
        print("refused", host, exc)
"""
        proc = run_in(box, 'HOSTS = ("127.0.0.1", "192.0.2.1")' + code)
        assert proc.returncode == 0, proc.stderr
        assert "connected" not in proc.stdout
        assert "Network is unreachable" in proc.stdout
        assert box.limit_in(proc.stdout) == "network"
        time.sleep(0.2)
        assert received == []
        # the same child with the network allowed does reach the host's listener
        allowed = make_sandbox(SandboxConfig(network=True), [tmp_path / "work"])
        proc = run_in(allowed, 'HOSTS = ("127.0.0.1",)' + code)
        assert "connected 127.0.0.1" in proc.stdout, proc.stdout + proc.stderr
        deadline = time.monotonic() + 5
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
        assert received == [b"escaped"]

    def test_memory_over_the_limit_is_refused(self, box: Sandbox) -> None:
        proc = run_in(box, "blob = bytearray(2 * 1024 ** 3)\nprint('allocated')")
        assert proc.returncode != 0
        assert "allocated" not in proc.stdout
        assert box.limit_in(proc.stderr) == "memory"
        assert run_in(box, "blob = bytearray(64 * 1024 ** 2)").returncode == 0

    def test_a_runaway_is_killed_with_its_children(self, box: Sandbox) -> None:
        # The child's pids are its own namespace's: the host finds the grandchild by its
        # unique command line instead.
        marker = f"{3600 + os.getpid() % 1000}.{time.monotonic_ns() % 1000}"
        code = (
            "import subprocess, sys\n"
            f"child = subprocess.Popen(['sleep', {marker!r}], start_new_session=True)\n"
            "print(child.pid, flush=True)\n"
            "while True: pass\n"
        )
        proc = popen_sandboxed([sys.executable, "-c", code], box, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()
        grandchild = _find(["sleep", marker])
        assert grandchild is not None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        kill_process_group(proc)
        proc.stdout.close()
        deadline = time.monotonic() + 10
        while _running(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(grandchild)


def _find(cmdline: list[str], timeout_s: float = 10) -> int | None:
    """The host pid of the process running exactly `cmdline`, waiting for it to appear."""
    wanted = "\0".join(cmdline) + "\0"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if (entry / "cmdline").read_text() == wanted:
                        return int(entry.name)
                except OSError:
                    continue
        time.sleep(0.05)
    return None


def _running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_kill_during_the_sandboxs_setup_leaves_nothing_running(box: Sandbox) -> None:
    """bwrap's child starts its own session and asks to die with bwrap only once set up: a
    kill in those first milliseconds (close() while a warm worker is still starting) must not
    leave it running outside the process group, holding the pipes and answering seconds
    later. Killed at every 2 ms of the first 80, each must end at once."""
    mark = os.urandom(6).hex()  # this run's children, not another test's
    ready = json.dumps({"ready": True})
    code = f"import time; time.sleep(3); print({ready!r}, flush=True); time.sleep(60) # {mark}"
    slow = []
    for step in range(40):
        child = WarmProcess([sys.executable, "-c", code], box, allowed_env(os.environ))
        time.sleep(step * 0.002)
        started = time.monotonic()
        child.kill()
        line = child.read_line(10)
        ended = time.monotonic() - started
        child.stop()
        if line is not None or ended > 1.0:
            slow.append((step * 2, round(ended, 2)))
    assert not slow, f"killed at (ms, then s until its pipes ended): {slow}"
    assert _find([sys.executable, "-c", code], timeout_s=0.5) is None


def test_a_kill_without_proc_to_list_still_kills(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where /proc cannot be listed, the kill falls back to the process group: the child is
    killed, never left stopped."""
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)

    def no_proc(path: str) -> None:
        raise FileNotFoundError(path)

    monkeypatch.setattr("patchit.harnesses.warm.os.scandir", no_proc)
    kill_process_group(proc)
    assert proc.returncode == -9


def test_uses_no_host_tmp(box: Sandbox, tmp_path: Path) -> None:
    """The child's /tmp is its own: nothing it writes there reaches the host's /tmp."""
    marker = f"patchit-private-tmp-{os.getpid()}"
    proc = run_in(
        box, f"open('/tmp/{marker}', 'w').write('x'); import os; print(os.listdir('/tmp'))"
    )
    assert proc.returncode == 0, proc.stderr
    assert marker in proc.stdout
    assert not (Path("/tmp") / marker).exists()


def test_a_refusal_logged_on_the_way_is_not_the_failure(box: Sandbox) -> None:
    """A unit that logs a refused connection (a metrics agent, a retry) and then fails on
    its own bug did not need the network: only the failure's own error says that."""
    code = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", 9), timeout=5)
except OSError as exc:
    print("metrics agent unreachable, going on:", exc, flush=True)
row = {"amount": 1}
print(row["amout"])
"""
    proc = run_in(box, code)
    assert proc.returncode == 1 and "KeyError: 'amout'" in proc.stderr, proc.stderr
    output = proc.stdout + proc.stderr
    assert detect_limit(output) == "network"  # the text alone names the network
    assert box.limit_in(output) is None
    refused = run_in(box, 'import socket\nsocket.create_connection(("127.0.0.1", 9))\n')
    assert box.limit_in(refused.stdout + refused.stderr) == "network"


class TestEnvironment:
    def test_only_the_allowlist_and_what_the_unit_names(self) -> None:
        env = {
            "PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "UTC",
            "PYTHONPATH": "/x", "DBT_TARGET": "dev", "AIRFLOW__CORE__X": "1",
            "AWS_SECRET_ACCESS_KEY": "k", "GITHUB_TOKEN": "t", "SHOP_CURRENCY": "EUR",
            "ANTHROPIC_API_KEY": "sk", "PATCHIT_HOME": "/h", "PATCHIT_CALLBACK_DISABLED": "1",
        }  # fmt: skip
        assert sorted(allowed_env(env)) == [
            "HOME", "LANG", "LC_ALL", "PATCHIT_CALLBACK_DISABLED", "PATH", "PYTHONPATH", "TZ",
        ]  # fmt: skip
        dbt = allowed_env(env, ("DBT_",), referenced={"SHOP_CURRENCY", "ANTHROPIC_API_KEY"})
        assert "DBT_TARGET" in dbt and "SHOP_CURRENCY" in dbt
        assert "ANTHROPIC_API_KEY" not in dbt and "AWS_SECRET_ACCESS_KEY" not in dbt
        assert "AIRFLOW__CORE__X" not in dbt and "PATCHIT_HOME" not in dbt

    def test_names_the_code_reads(self, tmp_path: Path) -> None:
        (tmp_path / "models").mkdir()
        (tmp_path / "models" / "m.sql").write_text(
            "select '{{ env_var(\"SHOP_CURRENCY\", 'EUR') }}' as c, {{ env_var('SHOP_RATE') }}"
        )
        (tmp_path / "dags.py").write_text(
            "import os\nA = os.environ['API_URL']\nB = os.environ.get('REGION')\n"
            "C = os.getenv(\"BUCKET\", 'x')\nD = os.environ.setdefault('MODE', 'a')\n"
        )
        (tmp_path / "target").mkdir()
        (tmp_path / "target" / "compiled.sql").write_text("{{ env_var('NOT_SCANNED') }}")
        found = referenced_env_names([tmp_path])
        assert found == {"SHOP_CURRENCY", "SHOP_RATE", "API_URL", "REGION", "BUCKET", "MODE"}
        assert names_in_text("echo $TOKEN ${OTHER}", shell=True) == {"TOKEN", "OTHER"}

    def test_the_child_sees_the_allowlist_only(
        self, box: Sandbox, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WAREHOUSE_PASSWORD", "planted-secret")
        proc = popen_sandboxed(
            [sys.executable, "-c", "import os; print(sorted(os.environ))"], box,
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        out, _ = proc.communicate(timeout=60)
        assert "WAREHOUSE_PASSWORD" not in out
        assert "PATH" in out


class TestHostIsHidden:
    def test_secrets_homes_and_patchit_home(self, box: Sandbox, _patchit_home: Path) -> None:
        (_patchit_home / "memory").mkdir(parents=True)
        (_patchit_home / "memory" / "attempts.sqlite3").write_text("incidents")
        code = f"""
import json, os
seen = {{}}
for path in ("/etc/shadow", "/root", {str(_patchit_home / "memory")!r}):
    try:
        seen[path] = os.listdir(path) if os.path.isdir(path) else open(path).read()
    except OSError as exc:
        seen[path] = None
seen["pids"] = [int(p) for p in os.listdir("/proc") if p.isdigit()]
print(json.dumps(seen))
"""
        proc = run_in(box, code)
        assert proc.returncode == 0, proc.stderr
        seen = json.loads(proc.stdout)
        assert not seen["/etc/shadow"]  # refused, or /dev/null's nothing
        # /root shows at most the mount points of what is bound back (the interpreter)
        bound = {p.relative_to("/root").parts[0] for p in (*box.readable, *box.writable)
                 if _within(p, Path("/root")) and p != Path("/root")}  # fmt: skip
        assert set(seen["/root"] or []) <= bound, seen["/root"]
        assert seen[str(_patchit_home / "memory")] is None
        assert max(seen["pids"]) < 100  # its own pid namespace

    def test_the_root_cannot_be_remounted(self, box: Sandbox) -> None:
        proc = run_in(
            box, "import subprocess; print(subprocess.run(['mount', '-o', 'remount,bind,rw', "
            "'/'], capture_output=True).returncode)",
        )  # fmt: skip
        assert proc.stdout.strip() not in ("", "0"), proc.stdout + proc.stderr


def test_a_layer_the_machine_refuses_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bwrap that refuses user namespaces (as with userns disabled): the sandbox runs without
    that layer, and the description, hence the report's fidelity line, says so."""
    require_bwrap()
    real = shutil.which("bwrap")
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do [ "$arg" = --unshare-user ] && '
        '{ echo "bwrap: No permissions to create new namespace" >&2; exit 1; }; done\n'
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    bubblewrap_problem.cache_clear()
    try:
        box = make_sandbox(SandboxConfig(), [tmp_path / "work"])
        proc = run_in(box, "import os; print(sorted(os.listdir('/proc'))[:1])")
    finally:
        bubblewrap_problem.cache_clear()
    assert box.kind == "bubblewrap"
    assert "--unshare-user" not in box.wrap(["true"])
    assert "--cap-drop" in box.wrap(["true"]) and "--unshare-pid" in box.wrap(["true"])
    text = box.describe()
    assert text.startswith("bubblewrap (no caps, pid ns, no network")
    assert text.endswith(
        "; not enforced: user ns (bwrap failed: bwrap: No permissions to create new namespace))"
    )
    assert proc.returncode == 0, proc.stderr
    check = DataCheck(status="not_run", harness="dbt", isolation=text, summary="not run")
    assert "not enforced: user ns" in check.fidelity()
