"""`patchit bench --perf`, the wrapper's own cost: `patchit dbt -- build` against `dbt build`.

On the example shop project (`patchit/examples/shop`) committed in a temp git repo:

    green     `dbt build` and `patchit dbt -- build`, fresh processes, interleaved K times
              on the green project (after one unmeasured build); the ratio of their medians
              (target <= 1.05x: a green run must cost what dbt costs)
    idle tail a dropped comma (a SQL syntax error no strategy has a fix for) committed, then
              `patchit dbt -- build`: from the line naming the report to the process's exit
              (target <= 0.2 s: nothing is left to wait for)

The green runs are plain child processes, as `dbt build`'s. The idle tail's run starts under a
launcher that is a child subreaper (Linux): a process the run left behind (a warm dbt worker)
is re-parented to it, counted in `leftover` and killed.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchit.errors import HarnessError
from patchit.examples import SHOP
from patchit.sandbox.git import run_git

GREEN_TARGET = 1.05  # wrapper / dbt build, medians
TAIL_TARGET_S = 0.2  # report line -> process exit
CLI_TARGET_S = 0.3  # `patchit --help`
CLI_RUNS = 5
DROPPED_COMMA = ("models/marts/orders.sql", "    o.customer_id,\n", "    o.customer_id\n")
_GIT_ID = ("-c", "user.name=patchit bench", "-c", "user.email=bench@localhost")

# Runs argv (stderr piped through, stdout dropped) as a child subreaper; prints one JSON line:
# the exit code, the seconds from the "report:" line to the child's exit, and the processes
# left behind (killed).
_LAUNCHER = r"""
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
report_at = None
for line in proc.stderr:
    if b"report: " in line:
        report_at = time.monotonic()
    sys.stderr.buffer.write(line)
proc.wait()
exited = time.monotonic()
me, left = os.getpid(), []
time.sleep(0.1)  # what was killed as the run ended has died by now: reaped below, not counted
while True:
    try:
        if os.waitpid(-1, os.WNOHANG)[0] == 0:
            break
    except ChildProcessError:
        break
for entry in os.listdir("/proc"):
    try:
        with open(f"/proc/{entry}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{entry}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, ValueError, IndexError):
        continue
    if int(fields[1]) == me:
        left.append(f"{entry} {fields[0].decode()} {cmdline[:200]}")
for item in left:
    try:
        pid = int(item.split()[0])
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
tail = None if report_at is None else exited - report_at
print(json.dumps({"exit_code": proc.returncode, "tail_s": tail, "leftover": left}))
"""


@dataclass
class WrappedRun:
    exit_code: int
    seconds: float
    tail_s: float | None  # from the report line to the exit; None when no report was named
    leftover: list[str] = field(default_factory=list)  # "pid state cmdline" of each
    stderr: str = ""


def shop_repo(dest: Path) -> Path:
    """The example shop project committed at the root of a new git repo at `dest` (what an
    earlier bench left there, in a kept `--workdir`, goes first)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(SHOP, dest, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    (dest / ".gitignore").write_text("target/\nlogs/\n*.duckdb*\ndbt_packages/\n")
    run_git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "shop: the example project")
    return dest


def commit_all(repo: Path, message: str) -> None:
    run_git(repo, "add", "-A")
    run_git(repo, *_GIT_ID, "commit", "-q", "-m", message)


def drop_comma(repo: Path) -> None:
    """Commit a SQL syntax error no strategy has a fix for."""
    rel, good, bad = DROPPED_COMMA
    path = repo / rel
    text = path.read_text(encoding="utf-8")
    if good not in text:
        raise HarnessError(f"{rel}: no `{good.strip()}` to break")
    path.write_text(text.replace(good, bad, 1), encoding="utf-8")
    commit_all(repo, "orders: a dropped comma")


def _timed(argv: list[str], repo: Path, env: dict[str, str], what: str) -> float:
    """Run `argv` in `repo`, a fresh process; its seconds (a failure is the benchmark's)."""
    started = time.monotonic()
    proc = subprocess.run(
        argv, cwd=repo, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise HarnessError(f"{what} failed in {repo}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return seconds


def dbt_build(repo: Path) -> float:
    """`dbt build` in `repo` (profiles.yml inside), a fresh process; its seconds."""
    dbt = Path(sys.executable).parent / "dbt"
    executable = str(dbt) if dbt.is_file() else (shutil.which("dbt") or "dbt")
    return _timed([executable, "build", "--profiles-dir", str(repo)], repo, _env(), "dbt build")


def _wrapper_argv(repo: Path, select: tuple[str, ...]) -> list[str]:
    return [sys.executable, "-m", "patchit", "dbt", "--project-dir", str(repo), "--",
            "build", *select, "--profiles-dir", str(repo)]  # fmt: skip


def green_build(repo: Path, home: Path) -> float:
    """`patchit dbt -- build` in `repo` (state in `home`), a fresh process as `dbt_build`'s;
    its seconds."""
    env = _env() | {"PATCHIT_HOME": str(home)}
    return _timed(_wrapper_argv(repo, ()), repo, env, "patchit dbt -- build on green")


def wrapped_build(repo: Path, home: Path, *select: str) -> WrappedRun:
    """`patchit dbt -- build [select]` in `repo` with its state in `home`, under the launcher
    (its seconds include the launcher's own start and its look for leftovers)."""
    argv = _wrapper_argv(repo, select)
    env = _env() | {"PATCHIT_HOME": str(home)}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *argv], cwd=repo, env=env, capture_output=True,
        text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.monotonic() - started
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError) as exc:
        raise HarnessError(f"the launcher failed:\n{proc.stderr[-3000:]}") from exc
    return WrappedRun(data["exit_code"], seconds, data["tail_s"], data["leftover"], proc.stderr)


def measure_green(
    repo: Path, home: Path, runs: int, say: Callable[[str], None] = lambda _: None
) -> tuple[list[float], list[float]]:
    """(dbt build seconds, wrapper seconds), interleaved `runs` times after one warm-up build."""
    dbt_build(repo)
    dbt_s: list[float] = []
    wrapper_s: list[float] = []
    for run in range(1, runs + 1):
        say(f"green wrapper run {run}/{runs}")
        dbt_s.append(round(dbt_build(repo), 3))
        wrapper_s.append(round(green_build(repo, home), 3))
    return dbt_s, wrapper_s


def measure_idle_tail(repo: Path, home: Path, *select: str) -> WrappedRun:
    """Commit a dropped comma in `repo` (built green) and time the wrapper's tail on it
    (`select`: dbt's selection, e.g. `--select orders`; default the whole build)."""
    drop_comma(repo)
    run = wrapped_build(repo, home, *select)
    if run.exit_code == 0 or run.tail_s is None:
        raise HarnessError(f"the dropped comma did not end in a report:\n{run.stderr[-3000:]}")
    return run


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    return env


@dataclass
class WrapperPerf:
    """The wrapper's measures: seconds in run order."""

    dbt_s: list[float] = field(default_factory=list)
    wrapper_s: list[float] = field(default_factory=list)
    tail_s: list[float] = field(default_factory=list)
    leftover: int = 0  # processes a wrapped run left behind
    cli_s: list[float] = field(default_factory=list)  # `patchit --help`

    def ratio(self) -> float:
        return statistics.median(self.wrapper_s) / statistics.median(self.dbt_s)


def run_wrapper_perf(
    work: Path, runs: int, say: Callable[[str], None] = lambda _: None
) -> WrapperPerf:
    """Both measures in `work` (the repo under `work/shop`, patchit's state `work/home`)."""
    say(f"timing `patchit dbt -- build` against `dbt build` ({runs} interleaved runs each)")
    shutil.rmtree(work, ignore_errors=True)  # an earlier bench's, in a kept `--workdir`
    repo = shop_repo(work / "shop")
    home = work / "home"
    dbt_s, wrapper_s = measure_green(repo, home, runs, say)
    say("timing the idle tail: a dropped comma, nothing to verify")
    tail = measure_idle_tail(repo, home)
    say(f"timing `patchit --help` ({CLI_RUNS} runs)")
    cli = measure_cli_start(CLI_RUNS)
    return WrapperPerf(dbt_s, wrapper_s, [round(tail.tail_s or 0.0, 3)], len(tail.leftover), cli)


def measure_cli_start(runs: int) -> list[float]:
    """Seconds of `patchit --help` in a new process, `runs` times."""
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "patchit", "--help"], capture_output=True, env=_env()
        )
        seconds.append(round(time.perf_counter() - started, 3))
        if done.returncode != 0:
            raise HarnessError(f"patchit --help failed: {done.stderr.decode()[-1000:]}")
    return seconds


def format_lines(
    dbt_s: list[float],
    wrapper_s: list[float],
    tail_s: list[float],
    cli_s: list[float] | None = None,
) -> list[str]:
    """The report's lines (none for a measure not taken)."""
    lines = []
    if dbt_s and wrapper_s:
        dbt, wrapper = statistics.median(dbt_s), statistics.median(wrapper_s)
        lines.append(
            f"green wrapper: {wrapper:.2f} s vs dbt build {dbt:.2f} s = {wrapper / dbt:.2f}x "
            f"(target <= {GREEN_TARGET:g}x; medians of {len(dbt_s)})"
        )
    if tail_s:
        lines.append(
            f"idle tail: report -> exit {statistics.median(tail_s):.2f} s "
            f"(target <= {TAIL_TARGET_S:g} s)"
        )
    if cli_s:
        cli = statistics.median(cli_s)
        met = "met" if cli <= CLI_TARGET_S else "NOT met"
        lines.append(
            f"cli start: patchit --help {cli:.2f} s (target <= {CLI_TARGET_S:g} s: {met}; "
            f"median of {len(cli_s)})"
        )
    return lines
