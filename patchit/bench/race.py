"""`make race`: racing workers on one spool and one memory heal each incident once.

W worker processes (`Worker.run(once=True)`, started together) share one `$PATCHIT_HOME`.
N events are spooled first, spread over K causes; each cause is a real git repository holding a
real failing Python job (a `KeyError` from a misspelt key, its traceback from a real run).
The fix is proposed by the real tier-0 fix-it (`python_rename_key`) and landed on a real
branch; only the runtime that re-runs the job is the library's `FakeHarness`, which passes
when the fixed key is in the file (real runtimes would make 4 x 1,000 events a long run and
say nothing more about racing).

Checked afterwards, and printed: every event processed exactly once (N done, 0 bad, 0 left),
K incidents, each fixed with exactly one verified attempt, exactly one `patchit/*` branch per
repository, no busy or locked error surfaced by any worker, both SQLite files pass SQLite's
integrity check, and every worker exited 0.

With `--state-url postgresql://...` (an empty database) the spool and the memory are that
Postgres state instead (written to the race's `$PATCHIT_HOME/patchit.toml`, as a deployment
does): claims take row locks with SKIP LOCKED, and the memory serialises its writes on an
advisory lock.

    python -m patchit.bench.race --workers 4 --events 1000 [--state-url URL]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patchit.config import PatchitConfig
from patchit.errors import BadInputError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.harnesses.fake import FakeHarness
from patchit.intake.airflow_scan import split_error
from patchit.intake.spool import Spool, spool_path
from patchit.loop.context import Context
from patchit.memory import DB_RELATIVE_PATH, Memory
from patchit.patching.fixits.python_keys import RenameKeyStrategy
from patchit.sandbox.git import run_git
from patchit.state.url import DEPLOYMENT_FILE

JOB = "dags/totals.py"
RIGHT = 'row["amount"]'
SOURCE = """\
rows = [{{"amount": 3, "day": "mon"}}, {{"amount": 4, "day": "tue"}}]


def total_{n}(rows):
    return sum(row["amout"] for row in rows)


print(total_{n}(rows))
"""
IDENTITY = ["user.name=Race Bench", "user.email=race@localhost"]
# SQLite's "database is locked" / "busy"; Postgres' lock timeouts and deadlocks
BUSY = re.compile(r"locked|busy|lock timeout|deadlock", re.IGNORECASE)


@dataclass
class RaceResult:
    """What the race did and what it left; `lost()` lists every broken promise."""

    workers: int
    events: int
    causes: int
    seconds: float = 0.0
    spool: dict[str, int] = field(default_factory=dict)
    incidents: dict[str, int] = field(default_factory=dict)
    verified_per_incident: dict[str, int] = field(default_factory=dict)
    branches_per_repo: dict[str, int] = field(default_factory=dict)
    events_in_memory: int = 0
    backend: str = "sqlite"
    busy_errors: int = 0
    exit_codes: list[int | None] = field(default_factory=list)
    integrity: dict[str, str] = field(default_factory=dict)

    def lost(self) -> list[str]:
        problems = []
        if self.spool != {"done": self.events}:
            problems.append(f"spool ends as {self.spool}, not {self.events} done")
        if self.incidents != {"fixed": self.causes}:
            problems.append(f"incidents {self.incidents}, not {self.causes} fixed")
        twice = {i: n for i, n in self.verified_per_incident.items() if n != 1}
        if twice:
            problems.append(f"incidents not healed exactly once: {twice}")
        branches = {r: n for r, n in self.branches_per_repo.items() if n != 1}
        if len(self.branches_per_repo) != self.causes or branches:
            problems.append(f"repositories without exactly one branch: {branches}")
        if self.events_in_memory != self.events:
            problems.append(f"{self.events_in_memory} events in memory, not {self.events}")
        if self.busy_errors:
            problems.append(f"{self.busy_errors} busy/locked errors surfaced")
        if any(code != 0 for code in self.exit_codes):
            problems.append(f"worker exit codes {self.exit_codes}")
        problems += [f"{name}: {why}" for name, why in self.integrity.items() if why != "ok"]
        return problems

    def summary(self) -> str:
        healed = sum(1 for n in self.verified_per_incident.values() if n == 1)
        dup = sum(1 for n in self.branches_per_repo.values() if n > 1)
        return (
            f"race ({self.backend}): {self.workers} workers x {self.events} events over "
            f"{self.causes} causes in "
            f"{self.seconds:.1f} s: {self.spool.get('done', 0)} done, "
            f"{self.spool.get('bad', 0)} bad, {healed}/{self.causes} incidents healed once, "
            f"{dup} duplicate branches, {self.busy_errors} busy errors"
            + (
                f", integrity {', '.join(f'{k} {v}' for k, v in self.integrity.items())}"
                if self.integrity
                else ""
            )
        )


def make_cause(root: Path, n: int) -> UniversalFailureEvent:
    """A repository whose job fails with a real KeyError; the failure as an Airflow event."""
    repo = root / f"repo-{n:03d}"
    (repo / "dags").mkdir(parents=True)
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / JOB).write_text(SOURCE.format(n=n))
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "totals", config=IDENTITY)
    sha = run_git(repo, "rev-parse", "HEAD").strip()
    proc = subprocess.run(
        [sys.executable, "-P", str(repo / JOB)], capture_output=True, text=True, cwd=repo,
        timeout=60, check=False,
    )  # fmt: skip
    error_type, message = split_error(proc.stderr)
    return UniversalFailureEvent(
        source=FailureSource.AIRFLOW, pipeline_id=f"totals_{n}", unit_id="total", unit_path=JOB,
        error_type=error_type, error_message=message, traceback=proc.stderr,
        repo_path=str(repo), commit=sha,
    )  # fmt: skip


def fake_context(home: Path, repo: Path | None, **kw: Any) -> Context:
    """The worker's context with the real fix-it and the fake runtime."""
    return Context(
        home=home,
        memory=kw["memory"],
        config=PatchitConfig(),
        strategies=[RenameKeyStrategy()],
        harnesses=[FakeHarness.passing_when(JOB, RIGHT)],
        say=kw.get("say", lambda _m: None),
        owner=kw["owner"],
    )


def _work(home: str, log: str, start: Any) -> None:
    from patchit.worker.worker import Worker

    start.wait()
    with open(log, "w", encoding="utf-8") as out:

        def say(line: str) -> None:
            out.write(line + "\n")

        try:
            Worker(Path(home), say=say, batch_size=25, make_context=fake_context).run(once=True)
        except Exception as exc:
            say(f"worker failed: {type(exc).__name__}: {exc}")
            raise


def use_state(home: Path, state_url: str) -> None:
    """Point the race's deployment at a Postgres state, which must be empty."""
    home.mkdir(parents=True, exist_ok=True)
    (home / DEPLOYMENT_FILE).write_text(f"[state]\nurl = {json.dumps(state_url)}\n")
    with Spool.open(home) as spool, Memory.open(home) as memory:
        if spool.counts() or memory.list_incidents():
            raise BadInputError(f"{spool.where}: not empty; race needs a fresh database")


def run_race(
    workdir: Path,
    workers: int = 4,
    events: int = 1000,
    causes: int = 20,
    say: Any = print,
    state_url: str | None = None,
) -> RaceResult:
    """Spool `events` over `causes` repositories, race `workers` on them, check the result
    (on the SQLite files under the race's home, or on the Postgres state at `state_url`)."""
    home = workdir / "home"
    result = RaceResult(workers, events, causes, backend="postgres" if state_url else "sqlite")
    if state_url:
        use_state(home, state_url)
    say(f"race: {causes} repositories with a failing job, {events} events spooled")
    failures = [make_cause(workdir / "repos", n) for n in range(causes)]
    with Spool.open(home) as spool:
        payloads = []
        for i in range(events):
            base = failures[i % causes]
            copy = base.model_copy(update={"event_id": f"race-{i:06d}", "run_id": f"run-{i}"})
            payloads.append(copy.model_dump(mode="json"))
        spool.put_many(payloads)
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    logs = [workdir / f"worker-{w}.log" for w in range(workers)]
    procs = [
        ctx.Process(target=_work, args=(str(home), str(logs[w]), start)) for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # let every interpreter come up, then release them together
    began = time.monotonic()
    start.set()
    for proc in procs:
        proc.join(1800)
    result.seconds = time.monotonic() - began
    result.exit_codes = [proc.exitcode for proc in procs]
    text = "".join(log.read_text(encoding="utf-8") for log in logs if log.exists())
    result.busy_errors = sum(1 for line in text.splitlines() if BUSY.search(line))
    _collect(home, failures, result)
    return result


def _collect(home: Path, failures: list[UniversalFailureEvent], result: RaceResult) -> None:
    with Spool.open(home) as spool:
        result.spool = spool.counts()
    with Memory.open(home) as memory:
        incidents = memory.list_incidents()
        result.incidents = dict(Counter(i.status.value for i in incidents))
        for incident in incidents:
            attempts = memory.attempts_for(incident.id)
            result.verified_per_incident[incident.id] = sum(
                1 for a in attempts if a.outcome == "verified"
            )
        [count] = memory.db.query("select count(*) as n from events")
        result.events_in_memory = int(count["n"])
    for failure in failures:
        repo = Path(failure.repo_path or "")
        branches = run_git(repo, "branch", "--list", "patchit/*").split()
        result.branches_per_repo[repo.name] = len([b for b in branches if b.startswith("patchit/")])
    if result.backend != "sqlite":
        return  # Postgres keeps its own pages whole; the rows were checked above
    for name, path in (("memory", home / DB_RELATIVE_PATH), ("spool", spool_path(home))):
        conn = sqlite3.connect(str(path))
        try:
            result.integrity[name] = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        finally:
            conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--events", type=int, default=1000, help="events spooled")
    parser.add_argument("--causes", type=int, default=20, help="distinct failures (incidents)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--state-url", help="race on this Postgres state (an empty database) instead of SQLite"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="patchit-race-") as tmp:
        result = run_race(
            Path(tmp), args.workers, args.events, args.causes, state_url=args.state_url
        )
    print(json.dumps(asdict(result), indent=2) if args.json else result.summary())
    problems = result.lost()
    for problem in problems:
        print(f"race: LOST: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
