"""`patchit doctor`'s checks of what the state dir needs at run time, each found by trying it:

- the memory and the spool can be written: a write transaction is begun and rolled back
  (`BEGIN IMMEDIATE`), so a file another process holds locked (an exclusive lock, a stuck
  writer) is reported with what to do, not found by the next heal;
- the filesystem holding `$PATCHIT_HOME` has room (`MIN_FREE_MB`): on a full disk the Airflow
  callback cannot spool a failure and a heal cannot make a worktree;
- the sandbox really hides the host's secrets: a sandboxed child tries to read `/etc/shadow`,
  a canary file in `$PATCHIT_HOME` and the memory and spool files. "hidden" is said only when
  it could read none of them.

Nothing is changed: the transaction writes nothing, and the canary is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from patchit.config import SandboxConfig
from patchit.doctor.doctor import Check, sqlite_files

MIN_FREE_MB = 100
LOCK_TIMEOUT_S = 2.0
PROBE_TIMEOUT_S = 60.0
CANARY = "patchit-doctor-canary"
_MB = 1024 * 1024

# the child's side: which of the paths (argv) it could read something from
_PROBE = """
import json, sys
seen = {}
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as handle:
            seen[path] = bool(handle.read(64))
    except OSError:
        seen[path] = False
print(json.dumps(seen))
"""


def check_writable(path: Path, home: Path) -> Check | None:
    """Whether `path` (an existing SQLite file) takes a write transaction now; None when it
    does not exist (the integrity line says so)."""
    if not path.is_file():
        return None
    name = f"{path.relative_to(home) if path.is_relative_to(home) else path} writable"
    try:
        conn = sqlite3.connect(path, timeout=LOCK_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return Check("fail", name, f"locked by another process for over "
                         f"{LOCK_TIMEOUT_S:g}s ({exc}): heals and the spool wait on it",
                         f"find the process holding it (fuser {path}) and stop it; a "
                         "`patchit worker` is never holding it this long")  # fmt: skip
        return Check("fail", name, f"cannot be written ({exc})",
                     f"check the permissions and the disk of {path.parent}")  # fmt: skip
    except sqlite3.DatabaseError as exc:
        return Check("fail", name, f"cannot be written ({exc})", f"move {path} aside")
    return Check("ok", name, "a write transaction was begun and rolled back")


def check_free_space(home: Path, min_free_mb: int = MIN_FREE_MB) -> Check:
    """Free space on the filesystem that holds (or will hold) `home`."""
    where = home
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        usage = shutil.disk_usage(where)
    except OSError as exc:
        return Check("fail", "free space", f"cannot read the free space of {where} ({exc})",
                     "check that the filesystem of $PATCHIT_HOME is mounted")  # fmt: skip
    free_mb = usage.free // _MB
    text = f"{free_mb} MB free on the filesystem of {where}"
    if free_mb < min_free_mb:
        return Check("fail", "free space", f"{text} (under {min_free_mb} MB): the Airflow "
                     "callback cannot keep failures and heals cannot make worktrees",
                     "free space there, or set PATCHIT_HOME to a larger filesystem")  # fmt: skip
    return Check("ok", "free space", text)


def check_secrets_hidden(home: Path, config: SandboxConfig) -> list[Check]:
    """A sandboxed child tries to read the host's secrets; no line when there is no
    bubblewrap sandbox to probe (the bubblewrap line says so)."""
    from patchit.errors import HarnessError
    from patchit.sandbox.isolation import make_sandbox

    if config.isolation == "subprocess":
        return []
    canary: Path | None = None
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="patchit-doctor-")))
        try:
            box = make_sandbox(config.model_copy(update={"network": False}), [work / "w"])
        except HarnessError:
            return []
        if box.kind != "bubblewrap":
            return []
        targets = [Path("/etc/shadow")]
        if home.is_dir():
            fd, name = tempfile.mkstemp(prefix=".doctor-", dir=home)
            canary = Path(name)
            stack.callback(canary.unlink, missing_ok=True)
            with os.fdopen(fd, "w") as handle:
                handle.write(CANARY)
            targets += [canary, *(p for p in sqlite_files(home) if p.is_file())]
        argv = box.wrap([sys.executable, "-c", _PROBE, *map(str, targets)])
        try:
            proc = subprocess.run(argv, preexec_fn=box.preexec(), capture_output=True,
                                  text=True, timeout=PROBE_TIMEOUT_S, check=False)  # fmt: skip
            seen = json.loads(proc.stdout)
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            return [Check("warn", "host secrets", f"could not probe the sandbox ({exc})",
                          "run `patchit doctor` again; report it if it persists")]  # fmt: skip
    shown = {str(canary): f"a file in $PATCHIT_HOME ({home})"} if canary else {}
    read = [shown.get(path, path) for path, got in seen.items() if got]
    if read:
        return [Check("fail", "host secrets", "a sandboxed run could read "
                      + ", ".join(read), "move PATCHIT_HOME out of /, /tmp and /var "
                      "(e.g. ~/.local/state/patchit), or hide the path")]  # fmt: skip
    names = ", ".join(shown.get(str(p), str(p)) for p in targets)
    return [Check("ok", "host secrets", f"hidden (a sandboxed run could not read {names})")]


def check_state_dir(home: Path, config: SandboxConfig) -> list[Check]:
    """The run-time checks of the state dir, in the order a reader fixes them."""
    checks = [check_free_space(home)]
    checks += [c for p in sqlite_files(home) if (c := check_writable(p, home)) is not None]
    return [*checks, *check_secrets_hidden(home, config)]
