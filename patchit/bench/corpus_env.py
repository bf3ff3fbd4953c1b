"""The outside world of a benchmark run: commands, environments, git, locks and hashes.

Everything here runs the tools a user runs (the `patchit`, `dbt` and `airflow` console
scripts beside this interpreter, plain `git`) as subprocesses; nothing calls patchit's
healing code, so the benchmark judges patchit from the outside. (git runs through
`patchit.sandbox.git.run_git`, for its hook-free, prompt-free settings.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError
from patchit.sandbox.git import run_git

BIN = Path(sys.executable).parent
GIT_DATE = "2026-01-15T09:00:00+00:00"  # fixed, so two copies of a scenario get equal shas
_GIT_CONFIG = ("user.name=bench", "user.email=bench@example.invalid", "init.defaultBranch=main")
_DROPPED_PREFIXES = ("AIRFLOW", "PATCHIT_", "ANTHROPIC_", "DBT_", "ETL_", "BILLING_", "GIT_")


def tool(name: str) -> str:
    """A console script of this environment (patchit, dbt, airflow), else one on PATH."""
    local = BIN / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise BadInputError(f"{name}: not installed; run `make demo` (or pip install -e .[dbt])")
    return found


@dataclass
class Proc:
    """One finished command: exit code, output and wall time."""

    cmd: list[str]
    code: int
    out: str
    wall_s: float
    stdout: str = ""

    def tail(self, chars: int = 1500) -> str:
        return self.out[-chars:]


def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment: nothing of the caller's Airflow, dbt, patchit or LLM settings
    leaks in (the LLM tier stays off: the benchmark runs offline)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"
    for key, value in (extra or {}).items():
        if value == "":
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(cmd: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 1800) -> Proc:
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        code, out, stdout = proc.returncode, proc.stdout + proc.stderr, proc.stdout
    except subprocess.TimeoutExpired as exc:
        code, out, stdout = -9, f"timed out after {timeout_s:g} s: {exc}", ""
    return Proc(cmd, code, out, time.monotonic() - started, stdout)


def git(repo: Path, *args: str) -> str:
    env = base_env({"GIT_AUTHOR_DATE": GIT_DATE, "GIT_COMMITTER_DATE": GIT_DATE})
    return run_git(repo, *args, config=_GIT_CONFIG, env=env).strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def copy_project(src: Path, dest: Path) -> Path:
    ignore = shutil.ignore_patterns("target", "logs", "output", "__pycache__", "*.duckdb*")
    shutil.copytree(src, dest, ignore=ignore)
    return dest


@contextmanager
def duckdb_lock(db_file: Path) -> Iterator[None]:
    """Another process holds DuckDB's write lock on `db_file` (a second writer, as in a
    cron overlap) for the duration of the block."""
    code = (
        "import duckdb, sys, time\n"
        "con = duckdb.connect(sys.argv[1])\n"
        "print('locked', flush=True)\n"
        "time.sleep(3600)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(db_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "locked":
            raise RuntimeError(f"could not take the DuckDB lock on {db_file}")
        yield
    finally:
        holder.terminate()
        holder.wait(timeout=30)


def db_content_hash(db_file: Path) -> str:
    """A hash of what a DuckDB file holds (relations, columns, sorted rows), or "absent".

    Two identical builds write different bytes (DuckDB files are not byte-reproducible), so
    "the same database" is judged on content, read through a read-only connection.
    """
    if not db_file.exists():
        return "absent"
    import duckdb

    digest = hashlib.sha256()
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        relations = con.execute(
            "select table_schema, table_name, table_type from information_schema.tables"
            " order by all"
        ).fetchall()
        for schema, name, kind in relations:
            digest.update(f"{schema}.{name}:{kind}\n".encode())
            cols = con.execute(
                "select column_name, data_type from information_schema.columns"
                " where table_schema = ? and table_name = ? order by ordinal_position",
                [schema, name],
            ).fetchall()
            digest.update(repr(cols).encode())
            digest.update(_relation_content(con, schema, name, kind).encode())
    finally:
        con.close()
    return digest.hexdigest()


def _relation_content(con: Any, schema: str, name: str, kind: str) -> str:
    """A view is its definition (its rows are the tables'; a broken view cannot be read);
    a table is its sorted rows."""
    import duckdb

    if kind == "VIEW":
        rows = con.execute(
            "select sql from duckdb_views() where schema_name = ? and view_name = ?",
            [schema, name],
        ).fetchall()
        return repr(rows)
    try:
        return repr(con.execute(f'select * from "{schema}"."{name}" order by all').fetchall())
    except duckdb.Error as exc:
        return f"unreadable: {exc}"


def tree_hash(root: Path) -> str:
    """A hash of every file under `root` (paths and bytes), or "absent"."""
    if not root.exists():
        return "absent"
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def tree_state(repo: Path, user_data: Path, data: str | None = None) -> dict[str, object]:
    """What "untouched" compares: status with ignored files, HEAD, branch, worktrees and the
    user's data (database content or output files; `data`: its hash, read elsewhere)."""
    main = str(repo.resolve())
    other_worktrees = [
        path
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ") and (path := line.split(" ", 1)[1]) != main
    ]
    if data is None:
        duckdb = user_data.suffix == ".duckdb"
        data = db_content_hash(user_data) if duckdb else tree_hash(user_data)
    return {
        "status": git(repo, "status", "--porcelain", "--ignored", "--untracked-files=all"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "branch", "--show-current"),
        "other_worktrees": other_worktrees,
        "data": data,
    }


def incidents(home: Path, cwd: Path) -> list[dict[str, object]]:
    proc = run([tool("patchit"), "incidents", "--json"], base_env({"PATCHIT_HOME": str(home)}),
               cwd)  # fmt: skip
    if proc.code != 0:
        raise RuntimeError(f"patchit incidents --json failed: {proc.tail()}")
    listed = json.loads(proc.stdout)
    return [i for i in listed if isinstance(i, dict)]


def report_json(home: Path, incident_id: str, cwd: Path) -> dict[str, object]:
    proc = run([tool("patchit"), "report", incident_id, "--format", "json"],
               base_env({"PATCHIT_HOME": str(home)}), cwd)  # fmt: skip
    if proc.code != 0:
        return {}
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
