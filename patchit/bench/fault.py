"""`make fault`: kill real heals at random points, resume, and count what was lost.

Each round breaks a fresh copy of the example dbt project (a git repository with its DuckDB
database, `sum(amount)` misspelt `sum(amout)` in `daily_revenue`), runs the real `dbt build`
that fails, and spools the failure exactly as the wrapper's intake makes it. `patchit worker
--once` then heals it with the real dbt harness and the real fix-it, and is killed with
SIGKILL (its whole process group, as a lost container would be):

- most kills by a timer with a random delay, uniform over the measured length of a heal;
- every `checkpoint_every`-th kill at a named checkpoint of `patchit.loop.faults` (`verified`:
  the data check passed, nothing is landed; `committed`; `branched`; ...), so the narrow
  windows a timer rarely hits are hit for certain.

After each kill the memory and the spool get SQLite's integrity check, and the next worker
run resumes (it may be killed again). The bench's kills come from outside, not from the heal:
its state dir sets `[worker] max_crashes` above the number of kills, so every incident is
resumed until it finishes (a heal that kills the worker itself is marked failed after 2 by
default: tests/test_crash_safety.py). Once `kills` kills are done, a last run finishes
everything, and the counts are printed: corrupt databases, stray worktrees (git's records,
`worktrees/`, `sandboxes/`, leases), lost incidents (a spooled failure not ending fixed), lost
verified fixes (a verified attempt whose incident has no branch holding the fix), and whether
each user's repository (HEAD, branch, status with ignored files, database bytes) is untouched.

    python -m patchit.bench.fault --kills 100
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from patchit.examples import SHOP
from patchit.intake.dbt import events_from_run
from patchit.intake.dbt_run import build_dbt_args, now_utc, run_dbt
from patchit.intake.spool import Spool, spool_path
from patchit.loop.faults import FAULT_ENV
from patchit.memory import DB_RELATIVE_PATH, Memory
from patchit.sandbox.git import head_commit, run_git
from patchit.state.dbfiles import quarantined

MODEL = "models/marts/daily_revenue.sql"
GOOD = "sum(amount) as revenue"
# one misspelling per round: each round is its own failure (fingerprint), as in real life; a
# diff landed for one fingerprint is a repeat for that fingerprint in any repository
TYPOS = ["amount"[:i] + c + "amount"[i + 1 :] for i in range(1, 6) for c in "bcdfghjklpqrsvwxz"]
IDENTITY = ["user.name=Dana Engineer", "user.email=dana@example.com"]
# the narrow windows first: a short run (CI's) still kills a verified, unlanded fix
CHECKPOINTS = ("verified", "committed", "branched", "claimed", "before-record", "finished")
Say = Callable[[str], None]


@dataclass
class FaultResult:
    kills: int = 0
    timer_kills: int = 0
    checkpoint_kills: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
    runs: int = 0
    heal_s: float = 0.0
    seconds: float = 0.0
    corrupt_databases: int = 0
    stray_worktrees: int = 0
    stray_dirs: int = 0
    stray_names: list[str] = field(default_factory=list)  # which, to find what left them
    stray_leases: int = 0
    lost_incidents: int = 0
    lost_verified_fixes: int = 0
    touched_user_trees: int = 0
    bad_rows: int = 0  # spooled failures marked bad: each was healthy, only killed nearby
    spool: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def lost(self) -> list[str]:
        counts = {
            "corrupt databases": self.corrupt_databases,
            "stray worktrees": self.stray_worktrees,
            "stray sandbox/worktree dirs": self.stray_dirs,
            "stray leases": self.stray_leases,
            "lost incidents": self.lost_incidents,
            "lost verified fixes": self.lost_verified_fixes,
            "healthy rows marked bad": self.bad_rows,
            "user trees touched": self.touched_user_trees,
        }
        problems = [f"{name}: {n}" for name, n in counts.items() if n]
        if self.stray_names:
            problems.append(f"left: {', '.join(self.stray_names)}")
        if self.spool.get("done", 0) != self.rounds or set(self.spool) - {"done"}:
            problems.append(f"spool ends as {self.spool}, not {self.rounds} done")
        return problems + self.notes

    def summary(self) -> str:
        at = ", ".join(f"{k} {v}" for k, v in sorted(self.checkpoint_kills.items()))
        untouched = self.rounds - self.touched_user_trees
        return (
            f"fault: {self.kills} kills ({self.timer_kills} by random timer over a "
            f"{self.heal_s:.1f} s heal, {sum(self.checkpoint_kills.values())} at checkpoints"
            f"{': ' + at if at else ''}) in {self.runs} worker runs over {self.rounds} "
            f"incidents, {self.seconds / 60:.1f} min\n"
            f"fault: corrupt databases {self.corrupt_databases}, stray worktrees "
            f"{self.stray_worktrees + self.stray_dirs}, stray leases {self.stray_leases}, "
            f"lost incidents {self.lost_incidents}, lost verified fixes "
            f"{self.lost_verified_fixes}, healthy rows marked bad {self.bad_rows}, user tree "
            f"untouched {untouched}/{self.rounds}"
        )


@dataclass
class Round:
    repo: Path
    event_id: str
    before: tuple[str, str, str, str]
    n: int


@contextmanager
def _quiet_in(cwd: Path) -> Iterator[None]:
    """Run dbt here with its output (inherited by its child) sent to /dev/null."""
    old_cwd = os.getcwd()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.chdir(cwd)
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)
        os.chdir(old_cwd)


def user_tree(repo: Path) -> tuple[str, str, str, str]:
    """What the user sees: HEAD, branch, status with ignored files, the database's bytes."""
    status = run_git(repo, "status", "--porcelain", "--ignored")
    branch = run_git(repo, "branch", "--show-current").strip()
    database = hashlib.sha256((repo / "shop.duckdb").read_bytes()).hexdigest()
    return head_commit(repo) or "", branch, status, database


def build_template(dest: Path) -> Path:
    """The example project after a green `dbt build`, committed."""
    shutil.copytree(SHOP, dest, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    (dest / ".gitignore").write_text("target/\nlogs/\n*.duckdb\n*.duckdb.wal\ndbt_packages/\n")
    with _quiet_in(dest):
        code, _ = run_dbt(build_dbt_args(["build"], dest, str(dest), None), dest.parent / "runs")
    if code != 0:
        raise RuntimeError(f"the example project does not build in {dest}")
    shutil.rmtree(dest / "logs", ignore_errors=True)
    return dest


def broken(n: int) -> str:
    return f"sum({TYPOS[n % len(TYPOS)]}) as revenue"


def break_copy(template: Path, dest: Path, n: int) -> tuple[Path, dict[str, object]]:
    """A fresh repository from the template with typo `n` committed, and its failure event."""
    shutil.copytree(template, dest)
    run_git(dest, "init", "-q", "-b", "main")
    run_git(dest, "add", "-A")
    run_git(dest, "commit", "-q", "-m", "shop", config=IDENTITY)
    model = dest / MODEL
    model.write_text(model.read_text().replace(GOOD, broken(n)))
    run_git(dest, "commit", "-qam", "daily_revenue: per day", config=IDENTITY)
    args = build_dbt_args(["build"], dest, str(dest), None)
    started = now_utc()
    with _quiet_in(dest):
        code, record = run_dbt(args, dest.parent / "runs")
        events = events_from_run(record, args, dest, dest, head_commit(dest), started)
    if code == 0 or len(events) != 1:
        raise RuntimeError(f"{dest}: expected one failed node, got exit {code}, {len(events)}")
    shutil.rmtree(dest / "logs", ignore_errors=True)
    return dest, events[0].model_dump(mode="json")


class Runner:
    """Worker runs against one state dir, killed on request."""

    def __init__(self, home: Path, logs: Path) -> None:
        self.home = home
        self.logs = logs
        self.runs = 0

    def run(self, kill_after_s: float | None = None, fault_at: str | None = None) -> bool:
        """One `patchit worker --once`; True if it was killed."""
        self.runs += 1
        env = {**os.environ, "PATCHIT_HOME": str(self.home)}
        env.pop(FAULT_ENV, None)
        if fault_at:
            env[FAULT_ENV] = fault_at
        with (self.logs / f"run-{self.runs:04d}.log").open("w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "patchit", "worker", "--once"],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
            try:
                code = proc.wait(timeout=kill_after_s if kill_after_s is not None else 1800)
                killed = code == -signal.SIGKILL
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
                killed = True
            _kill_group(proc.pid)  # what the dead worker left running (its dbt worker)
        return killed


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return


def integrity_problems(home: Path) -> int:
    """Damaged state files: failed integrity checks, and files patchit had to move aside."""
    bad = 0
    for path in (home / DB_RELATIVE_PATH, spool_path(home)):
        if not path.exists():
            continue
        conn = sqlite3.connect(str(path))
        try:
            ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        except sqlite3.DatabaseError:
            ok = False
        finally:
            conn.close()
        bad += (not ok) + len(quarantined(path))
    return bad


def run_fault(
    workdir: Path,
    kills: int = 100,
    checkpoint_every: int = 4,
    seed: int = 1126,
    say: Say = print,
) -> FaultResult:
    """Kill `kills` worker runs at random points of real heals; resume; count what was lost."""
    rng = random.Random(seed)
    home, logs = workdir / "home", workdir / "logs"
    logs.mkdir(parents=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "patchit.toml").write_text(f"[worker]\nmax_crashes = {kills + 2}\n")
    result = FaultResult()
    started = time.monotonic()
    say(f"fault: building the example project (seed {seed})")
    template = build_template(workdir / "template")
    runner = Runner(home, logs)
    rounds: list[Round] = []

    def new_round() -> None:
        n = len(rounds)
        repo, event = break_copy(template, workdir / "repos" / f"shop-{n:03d}", n)
        rounds.append(Round(repo, str(event["event_id"]), user_tree(repo), n))
        with Spool.open(home) as spool:
            spool.put(event)

    new_round()  # the first heal is not killed: it measures how long a heal takes
    began = time.monotonic()
    runner.run()
    result.heal_s = time.monotonic() - began
    say(f"fault: one heal takes {result.heal_s:.1f} s; killing {kills} runs")
    pending = False
    while result.kills < kills:
        if not pending:
            new_round()
        at = None
        if result.kills % checkpoint_every == checkpoint_every - 1:
            at = CHECKPOINTS[(result.kills // checkpoint_every) % len(CHECKPOINTS)]
        delay = None if at else rng.uniform(0.2, 1.25 * result.heal_s)
        killed = runner.run(kill_after_s=delay, fault_at=at)
        pending = killed
        if not killed:
            continue
        result.kills += 1
        if at:
            result.checkpoint_kills[at] = result.checkpoint_kills.get(at, 0) + 1
        else:
            result.timer_kills += 1
        result.corrupt_databases += integrity_problems(home)
        if result.kills % 10 == 0:
            say(f"fault: {result.kills} kills, {len(rounds)} incidents")
    runner.run()  # finish what the last kill left
    result.runs, result.rounds = runner.runs, len(rounds)
    _check(home, rounds, result)
    result.seconds = time.monotonic() - started
    return result


def _check(home: Path, rounds: list[Round], result: FaultResult) -> None:
    result.corrupt_databases += integrity_problems(home)
    for area in ("worktrees", "sandboxes"):
        base = home / area
        stray = sorted(base.iterdir()) if base.is_dir() else []
        result.stray_dirs += len(stray)
        result.stray_names += [f"{area}/{p.name}" for p in stray]
    with Spool.open(home) as spool:
        result.spool = spool.counts()
    result.bad_rows = result.spool.get("bad", 0)
    with Memory.open(home) as memory:
        result.stray_leases = len(list(memory.db.query("select * from leases")))
        statuses: Counter[str] = Counter()
        for one in rounds:
            rows = list(
                memory.db.query("select incident_id from events where event_id = ?", [one.event_id])
            )
            incident = memory.get_incident(rows[0]["incident_id"]) if rows else None
            statuses[incident.status.value if incident else "missing"] += 1
            fixed = incident is not None and incident.status == "fixed" and incident.branch
            if not fixed:
                result.lost_incidents += 1
            verified = incident is not None and any(
                a.outcome == "verified" for a in memory.attempts_for(incident.id)
            )
            branch = str(incident.branch) if incident else ""
            on_branch = bool(fixed) and _holds_fix(one.repo, branch, one.n)
            if verified and not on_branch:
                result.lost_verified_fixes += 1
            worktrees = run_git(one.repo, "worktree", "list", "--porcelain").count("worktree ")
            result.stray_worktrees += worktrees - 1
            if user_tree(one.repo) != one.before:
                result.touched_user_trees += 1
        if set(statuses) != {"fixed"}:
            result.notes.append(f"incident statuses: {dict(statuses)}")


def _holds_fix(repo: Path, branch: str, n: int) -> bool:
    shown = run_git(repo, "show", f"{branch}:{MODEL}", check=False)
    return GOOD in shown and broken(n) not in shown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kills", type=int, default=100, help="worker runs to kill")
    parser.add_argument(
        "--checkpoint-every", type=int, default=4, help="every Nth kill at a checkpoint"
    )
    parser.add_argument("--seed", type=int, default=1126, help="random seed of the kill times")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="patchit-fault-") as tmp:
        workdir = args.keep or Path(tmp)
        result = run_fault(workdir, args.kills, args.checkpoint_every, args.seed)
    print(json.dumps(asdict(result), indent=2) if args.json else result.summary())
    problems = result.lost()
    for problem in problems:
        print(f"fault: LOST: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
