"""`patchit doctor`: check an installation and say what to fix.

Each check is one `Check` line, `ok`, `warn` or `fail`, with the fix when it is not ok:
versions (patchit, Python, dbt, Airflow, anthropic), bubblewrap and which isolation layers it
can enforce on this machine (the same probe the harnesses use), `$PATCHIT_HOME` and the
integrity of patchit's SQLite files (memory and spool, opened read-only: `PRAGMA
integrity_check`), what the state dir needs at run time, each tried (`patchit.doctor.home`:
the files take a write, there is free space, a sandboxed child cannot read the host's
secrets nor the state dir), which state backend is in use (embedded SQLite, or the Postgres
state URL: reachable or not), and whether dbt and Airflow can be reached. Nothing is changed,
and no dbt or Airflow process is started unless `deep` asks for it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from patchit import __version__
from patchit.config import SandboxConfig

Status = Literal["ok", "warn", "fail"]
MIN_PYTHON = (3, 11)
DEEP_TIMEOUT_S = 120.0
_LAYER_FIX = {
    "user ns": "allow user namespaces (sysctl user.max_user_namespaces > 0, "
    "kernel.unprivileged_userns_clone=1; in a container, a seccomp profile that permits them)",
    "no caps": "run bubblewrap with a user namespace or as root, so it can drop capabilities",
    "pid ns": "allow pid namespaces (in a container, a seccomp profile that permits "
    "unshare(CLONE_NEWPID))",
}


@dataclass(frozen=True)
class Check:
    status: Status
    name: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return f"{text}; fix: {self.fix}" if self.fix and self.status != "ok" else text


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_versions() -> list[Check]:
    checks = [Check("ok", "patchit", __version__)]
    python = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        checks.append(Check("fail", "python", python, f"use Python {need} or newer"))
    else:
        checks.append(Check("ok", "python", f"{python} ({sys.executable})"))
    for name, dists, extra in (
        ("dbt", ("dbt-core", "dbt-duckdb"), "dbt"),
        ("airflow", ("apache-airflow",), "airflow"),
    ):
        found = {dist: _version(dist) for dist in dists}
        if all(v is None for v in found.values()):
            fix = f"pip install 'patchit[{extra}]' to heal {name} failures"
            checks.append(Check("warn", name, "not installed", fix))
            continue
        text = ", ".join(f"{d} {v}" if v else f"{d} missing" for d, v in found.items())
        missing = [d for d, v in found.items() if v is None]
        fix = f"pip install {' '.join(missing)}" if missing else ""
        checks.append(Check("warn" if missing else "ok", name, text, fix))
    anthropic = _version("anthropic")
    if anthropic:
        checks.append(Check("ok", "anthropic", anthropic))
    elif os.environ.get("ANTHROPIC_API_KEY"):
        checks.append(Check("warn", "anthropic", "ANTHROPIC_API_KEY is set but the client is "
                            "not installed", "pip install 'patchit[llm]'"))  # fmt: skip
    return checks


def check_bubblewrap(config: SandboxConfig) -> list[Check]:
    """What the sandbox can enforce here, from the harnesses' own probe."""
    from patchit.sandbox.isolation import bubblewrap_enforcement

    enforcement = bubblewrap_enforcement()
    if enforcement.problem is not None:
        status: Status = "fail" if config.isolation == "bubblewrap" else "warn"
        if config.isolation == "subprocess":
            return [Check("warn", "sandbox", "isolation = 'subprocess' in the config: harness "
                          "runs are not confined (writes, network, processes, secrets)",
                          "set isolation = \"auto\" and install bubblewrap")]  # fmt: skip
        return [Check(status, "bubblewrap", f"unusable ({enforcement.problem}): harness runs "
                      "fall back to a plain subprocess with no write, network, process or "
                      "secret confinement", "apt-get install bubblewrap")]  # fmt: skip
    checks = [
        # whether the host's secrets are hidden is probed, not claimed (`home`)
        Check("ok", "bubblewrap", "enforces " + ", ".join([*enforcement.layers, "no network",
              "env allowlist", "private /tmp", "read-only root"]))
    ]  # fmt: skip
    for layer, why in enforcement.missing:
        checks.append(Check("warn", f"bubblewrap {layer}", f"not enforced ({why})",
                            _LAYER_FIX.get(layer, "")))  # fmt: skip
    if config.isolation == "subprocess":
        checks.append(
            Check(
                "warn",
                "sandbox",
                "isolation = 'subprocess' in the config: bubblewrap works here but is not used",
                'set isolation = "auto"',
            )
        )
    if config.network:
        checks.append(Check("warn", "sandbox network", "allowed by the config: sandboxed runs "
                            "can reach the network and abstract sockets",
                            "set network = false unless the pipeline needs it"))  # fmt: skip
    return checks


def sqlite_files(home: Path) -> list[Path]:
    """patchit's SQLite files under `home`: memory and spool."""
    from patchit.intake.spool import SPOOL_RELATIVE_PATH
    from patchit.memory.sqlite import DB_RELATIVE_PATH

    found = {home / DB_RELATIVE_PATH, home / SPOOL_RELATIVE_PATH}
    for folder in ("memory", "spool"):
        found.update((home / folder).glob("*.sqlite3"))
    return sorted(found)


def _aside(path: Path) -> str:
    return f"move {path} aside (keep it for recovery); patchit starts a new one"


def check_sqlite(path: Path, home: Path) -> Check:
    """`PRAGMA integrity_check` on one file, opened read-only (never created or changed)."""
    name = str(path.relative_to(home)) if path.is_relative_to(home) else str(path)
    if not path.exists():
        return Check("ok", name, "not created yet")
    if not path.is_file():
        return Check("fail", name, "not a regular file", f"move {path} aside")
    size = path.stat().st_size
    if size == 0:
        return Check("warn", name, "empty (0 bytes): its data is gone or it was never written",
                     f"restore {path} from a backup, or remove it to start afresh")  # fmt: skip
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return Check("fail", name, f"cannot be read as SQLite ({exc})", _aside(path))
    result = "; ".join(str(row[0]) for row in rows[:5])
    if result != "ok":
        return Check("fail", name, f"integrity check failed: {result[:300]}", _aside(path))
    return Check("ok", name, f"integrity ok ({size // 1024} KiB)")


def check_home(home: Path) -> list[Check]:
    checks: list[Check] = []
    if not home.exists():
        checks.append(Check("ok", "PATCHIT_HOME", f"{home} (created on first use)"))
    elif not os.access(home, os.W_OK):
        checks.append(Check("fail", "PATCHIT_HOME", f"{home} is not writable",
                            "fix its permissions or set PATCHIT_HOME / --home"))  # fmt: skip
    else:
        checks.append(Check("ok", "PATCHIT_HOME", str(home)))
    # with a Postgres state the SQLite files are not used: only leftovers are checked
    files = [p for p in sqlite_files(home) if p.exists() or not _uses_postgres(home)]
    checks += [check_sqlite(path, home) for path in files]
    return checks


def _uses_postgres(home: Path) -> bool:
    from patchit.errors import BadInputError
    from patchit.state.url import state_url

    try:
        return state_url(home) is not None
    except BadInputError:
        return True  # a URL was given, if a bad one: the state line says so


def check_state(home: Path) -> Check:
    """Which backend holds the spool and the memory, and whether a Postgres one answers
    (read-only: a connection and two catalogue lookups)."""
    from patchit.config import load_deployment
    from patchit.errors import BadInputError
    from patchit.state.pg import StateDbError, connect, scrub
    from patchit.state.url import mask_url, state_url

    try:
        load_deployment(home)
        url = state_url(home)
    except BadInputError as exc:
        return Check("fail", "state", str(exc), "fix the state URL or $PATCHIT_HOME/patchit.toml")
    if url is None:
        return Check("ok", "state", f"embedded SQLite under {home} (one host; set [state] url "
                     "in patchit.toml to share it between workers)")  # fmt: skip
    try:
        raw = connect(url, connect_timeout_s=5.0, lock_timeout_s=5.0, statement_timeout_s=5.0)
    except BadInputError as exc:
        return Check("fail", "state", str(exc))  # the line says what to do
    try:
        cur = raw.cursor()
        cur.execute("show server_version")
        version = cur.fetchone()[0]
        cur.execute("select to_regclass('incidents') is not null, to_regclass('spool') is not null")
        memory, spool = cur.fetchone()
    except Exception as exc:  # a server that accepts the login but not the reads
        why = " ".join(str(StateDbError(scrub(str(exc), url))).split())  # one line
        return Check("fail", "state", f"postgres {mask_url(url)}: {why}",
                     "grant the role usage of the database and its schema")  # fmt: skip
    finally:
        raw.close()
    tables = (
        "spool and memory tables present"
        if memory and spool
        else "tables created by the first worker"
    )
    return Check("ok", "state", f"postgres {mask_url(url)} reachable (server {version}; {tables})")


def _run(argv: list[str]) -> tuple[bool, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=DEEP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    text = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode == 0, (text[-1] if text else f"exit {proc.returncode}")[:200]


def check_runtimes(deep: bool = False) -> list[Check]:
    """Whether the dbt and Airflow harnesses can start their runtime here."""
    checks: list[Check] = []
    dbt = Path(sys.executable).parent / "dbt"
    dbt_exe = str(dbt) if dbt.is_file() else shutil.which("dbt")
    if importlib.util.find_spec("dbt") is None:
        checks.append(Check("warn", "dbt reachable", "dbt is not importable by patchit's Python",
                            "pip install 'patchit[dbt]' into patchit's environment"))  # fmt: skip
    elif dbt_exe is None:
        checks.append(Check("warn", "dbt reachable", "no `dbt` executable (the warm worker "
                            "works; fresh runs and the wrapper need it)",
                            "install dbt-core next to patchit"))  # fmt: skip
    elif deep:
        ok, text = _run([dbt_exe, "--version"])
        checks.append(Check("ok" if ok else "fail", "dbt reachable", text,
                            "" if ok else "reinstall dbt-core and dbt-duckdb"))  # fmt: skip
    else:
        checks.append(Check("ok", "dbt reachable", f"{dbt_exe} (--deep runs it)"))
    if importlib.util.find_spec("airflow") is None:
        checks.append(Check("warn", "airflow reachable", "Airflow is not importable by "
                            "patchit's Python", "pip install 'patchit[airflow]'"))  # fmt: skip
    elif deep:
        ok, text = _run([sys.executable, "-m", "airflow", "version"])
        checks.append(Check("ok" if ok else "fail", "airflow reachable", text,
                            "" if ok else "reinstall apache-airflow"))  # fmt: skip
    else:
        checks.append(Check("ok", "airflow reachable", "importable (--deep runs it)"))
    return checks


def run_checks(home: Path, config: SandboxConfig, deep: bool = False) -> list[Check]:
    return [
        *check_versions(),
        *check_bubblewrap(config),
        *check_home(home),
        check_state(home),
        *check_runtimes(deep),
    ]


def exit_code(checks: Iterable[Check]) -> int:
    """1 if any check failed, else 0 (warnings do not fail)."""
    return 1 if any(c.status == "fail" for c in checks) else 0
