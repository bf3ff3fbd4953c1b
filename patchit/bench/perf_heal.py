"""`patchit bench --perf`, healing on the example project (what `make demo` heals).

On the shop project (`patchit/examples/shop`) committed in a temp git repo and built green
once, `daily_revenue` gets the demo's column typo (`sum(amount)` -> `sum(amout)`). Then,
interleaved, K times each:

    select build   `dbt build --select daily_revenue+` of the fix, a fresh process in a
                   checkout of the fix with its own database copy (re-running the failed
                   model by hand)
    heal           `patchit dbt -- build` on the typo, in a fresh copy of the repo and of
                   patchit's state (as a first heal left it: the dbt worker's warm-up parse
                   cached): from dbt's last line (`Done. PASS=...`) to the line naming
                   the verified branch; each stage's start is taken from the line that
                   announces it (target: heal <= 1.5x select build)
    verify         one candidate's trial of the fix: its worktree made and patched, then
                   verified by the warm dbt harness (the worker started once beforehand), no
                   data check
    verify+check   the same, plus the data check of a first candidate (a baseline of its
                   own, its worktree made beside the candidate's and its build started
                   once the candidate's worktree is made, as the loop does)
    sequential     the same, the baseline built after the verification (as before the
                   baseline was built ahead)

The data check's extra cost is (verify+check - verify) / verify (target <= 0.3x).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from patchit.bench.perf_wrapper import commit_all, dbt_build, green_build, shop_repo
from patchit.config import resolve_home
from patchit.errors import HarnessError
from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.fidelity.ahead import BaselineAhead
from patchit.fidelity.check import check_candidate
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.sandbox.git import run_git
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home

HEAL_TARGET = 1.5  # dbt exit -> verified branch, / `dbt build --select node+`
DATA_TARGET = 0.3  # the data check's extra cost over one verification
TYPO = ("models/marts/daily_revenue.sql", "sum(amount) as revenue", "sum(amout) as revenue")
MODEL = "daily_revenue"
# (stage, the text of the line that starts it), in the order the wrapper prints them
STAGES = (
    ("dbt exit", "Done. PASS="),
    ("intake", "failed node(s)"),
    ("evidence", "gathering evidence"),
    ("candidate", "candidate 1:"),
    ("verify", "verifying with the"),
    ("data check", "data check: comparing"),
    ("landing", "verified in"),
    ("branch", "verified fix on branch"),
)


@dataclass
class HealPerf:
    """Seconds in run order; `stages_s`: per heal run, each stage's seconds."""

    select_s: list[float] = field(default_factory=list)
    heal_s: list[float] = field(default_factory=list)
    stages_s: list[dict[str, float]] = field(default_factory=list)
    verify_s: list[float] = field(default_factory=list)
    checked_s: list[float] = field(default_factory=list)
    sequential_s: list[float] = field(default_factory=list)

    def heal_ratio(self) -> float:
        return statistics.median(self.heal_s) / statistics.median(self.select_s)

    def data_ratio(self, with_check: list[float] | None = None) -> float:
        verify = statistics.median(self.verify_s)
        return (statistics.median(with_check or self.checked_s) - verify) / verify

    def stage_medians(self) -> dict[str, float]:
        names = [name for name, _ in STAGES[:-1]]
        return {n: statistics.median(s.get(n, 0.0) for s in self.stages_s) for n in names}


def stage_seconds(lines: list[tuple[float, str]]) -> dict[str, float]:
    """Each stage's seconds from timestamped output lines: from the first line holding its
    marker (found in STAGES order) to the next stage's; {} when a stage's line is missing."""
    found: list[tuple[str, float]] = []
    index = 0
    for at, line in lines:
        if index < len(STAGES) and STAGES[index][1] in line:
            found.append((STAGES[index][0], at))
            index += 1
    if index < len(STAGES):
        return {}
    return {name: found[i + 1][1] - at for i, (name, at) in enumerate(found[:-1])}


def timed_lines(
    argv: list[str], cwd: Path, env: dict[str, str]
) -> tuple[int, list[tuple[float, str]]]:
    """Run argv, stdout and stderr merged; (exit code, (monotonic time, line) per line)."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    lines = [(time.monotonic(), raw.decode(errors="replace")) for raw in proc.stdout]
    return proc.wait(), lines


class _HealBench:
    def __init__(self, work: Path, say: Callable[[str], None]) -> None:
        self.work, self.say = work, say
        self.template = work / "template"
        self.count = 0

    def setup(self) -> None:
        repo = shop_repo(self.template / "shop")
        green_build(repo, self.template / "home")  # builds the warehouse; patchit's state made
        # What patchit's state holds after its first heal: the dbt worker's warm-up parse (the
        # first heal on a machine parses dbt's macros in full once). Each heal copies it.
        prime = (
            "from patchit.harnesses.dbt.harness import DbtHarness\n"
            "with DbtHarness() as h: h.start()"
        )
        home = {"PATCHIT_HOME": str(self.template / "home")}
        subprocess.run([sys.executable, "-c", prime], env=_env() | home, check=True,
                       capture_output=True)  # fmt: skip
        self.good = (repo / TYPO[0]).read_text(encoding="utf-8")
        self.fixed = self._copy("fixed")  # the select build's checkout: the fix, built green

    def _copy(self, name: str) -> Path:
        dest = self.work / name
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(self.template, dest, symlinks=True)
        return dest / "shop"

    def select_build(self) -> float:
        self.count += 1
        path = self.fixed / TYPO[0]
        path.write_text(f"{self.good}-- patchit bench run {self.count}\n", encoding="utf-8")
        dbt = Path(sys.executable).parent / "dbt"
        started = time.monotonic()
        code, lines = timed_lines(
            [str(dbt), "build", "--select", f"{MODEL}+", "--profiles-dir", str(self.fixed)],
            self.fixed, _env(),
        )  # fmt: skip
        if code != 0:
            raise HarnessError("dbt build --select of the fix failed:\n" + _tail(lines))
        return time.monotonic() - started

    def heal(self) -> tuple[float, dict[str, float]]:
        self.count += 1
        repo = self._copy(f"heal-{self.count}")
        path, good, bad = repo / TYPO[0], TYPO[1], TYPO[2]
        path.write_text(path.read_text(encoding="utf-8").replace(good, bad), encoding="utf-8")
        commit_all(repo, "daily_revenue: sum revenue per day")
        argv = [sys.executable, "-m", "patchit", "dbt", "--project-dir", str(repo), "--",
                "build", "--profiles-dir", str(repo)]  # fmt: skip
        env = _env() | {"PATCHIT_HOME": str(repo.parent / "home")}
        code, lines = timed_lines(argv, repo, env)
        stages = stage_seconds(lines)
        if code != 1 or not stages:
            raise HarnessError(f"the typo was not healed (exit {code}):\n" + _tail(lines))
        shutil.rmtree(repo.parent, ignore_errors=True)
        return sum(stages.values()), stages


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    return env


def _tail(lines: list[tuple[float, str]]) -> str:
    return "".join(line for _, line in lines)[-3000:]


class _CheckBench:
    """One warm harness verifying the fix in-process, with and without the data check."""

    def __init__(self, work: Path, template: Path, good: str) -> None:
        self.repo = work / "shop"
        shutil.copytree(template / "shop", self.repo, symlinks=True)
        self.good, self.count = good, 0
        path = self.repo / TYPO[0]
        path.write_text(good.replace(TYPO[1], TYPO[2]), encoding="utf-8")
        commit_all(self.repo, "daily_revenue: sum revenue per day")
        started = datetime.now(UTC)
        dbt_build_failing(self.repo)
        self.event = UniversalFailureEvent(
            source=FailureSource.DBT, pipeline_id="shop", unit_id=f"model.shop.{MODEL}",
            repo_path=str(self.repo), commit=run_git(self.repo, "rev-parse", "HEAD").strip(),
            status="error",
            artifacts={"manifest": str(self.repo / "target" / "manifest.json")},
            dbt=DbtInvocation(command="build", args=["build"], project_dir=str(self.repo),
                              cwd=str(self.repo), started_utc=started),
        )  # fmt: skip
        self.snapshot = snapshot_database(self.repo / "shop.duckdb", work / "snapshot")

    def run(self, harness: DbtHarness, check: str) -> float:
        """One candidate: verify only (check ""), or with the data check ("ahead": the
        baseline beside the verification, "after": after it); its seconds."""
        self.count += 1
        sandbox = resolve_home() / "sandboxes" / f"bench-heal-{self.count}"
        scratch = sandbox / "candidate"
        snapshot = self.snapshot.parent
        ahead = BaselineAhead(self.event, self.repo, harness, snapshot, sandbox / "baseline",
                              None)  # fmt: skip
        # as `trial.run_trial`: the candidate's worktree is made beside the baseline's, then
        # the baseline's build starts (once policy and memory let the candidate through) and
        # the candidate is patched and verified; the worktree is timed in every variant
        started = time.monotonic()
        where = worktrees_home() / "bench-heal-candidate"
        try:
            if check == "ahead":
                ahead.prepare()
            root = create_worktree(self.repo, "HEAD", where)
            if check == "ahead":
                ahead.start()
            (root / TYPO[0]).write_text(f"{self.good}-- candidate {self.count}\n", "utf-8")
            workspace = Workspace(root=root, scratch=scratch, snapshot=snapshot)
            result = harness.verify(workspace, self.event)
            if not result.passed:
                raise HarnessError(f"the fix did not verify:\n{result.output[-3000:]}")
            if check:
                data = check_candidate(
                    self.event, None, self.repo, harness, workspace, result,
                    baseline_commit=None, work=sandbox / "baseline", ahead=ahead,
                )  # fmt: skip
                if data.status != "same":
                    raise HarnessError(f"the data check did not agree: {data.summary}")
            return time.monotonic() - started
        finally:
            if ahead.started:
                ahead.wait()  # a baseline still building uses the sandbox removed below
            remove_worktree(self.repo, where)
            shutil.rmtree(sandbox, ignore_errors=True)


def dbt_build_failing(repo: Path) -> None:
    """The user's failing `dbt build` (its manifest and partial parse are the event's)."""
    try:
        dbt_build(repo)
    except HarnessError as exc:
        if "amout" in str(exc):
            return
        raise
    raise HarnessError("the typo did not make dbt build fail")


def run_heal_perf(work: Path, runs: int, say: Callable[[str], None] = lambda _: None) -> HealPerf:
    """Every measure above, interleaved `runs` times, in `work`."""
    say("healing the example project's column typo, against `dbt build --select` of the fix")
    shutil.rmtree(work, ignore_errors=True)  # an earlier bench's (its state remembers its heals)
    bench = _HealBench(work, say)
    bench.setup()
    result = HealPerf()
    checks = _CheckBench(work / "check", bench.template, bench.good)
    with DbtHarness(warm=True) as harness:
        harness.start()
        checks.run(harness, "")  # one unmeasured run: the worker's first parse of the project
        for run in range(1, runs + 1):
            say(f"heal run {run}/{runs}")
            result.select_s.append(round(bench.select_build(), 3))
            seconds, stages = bench.heal()
            result.heal_s.append(round(seconds, 3))
            result.stages_s.append({k: round(v, 3) for k, v in stages.items()})
            result.verify_s.append(round(checks.run(harness, ""), 3))
            result.checked_s.append(round(checks.run(harness, "ahead"), 3))
            result.sequential_s.append(round(checks.run(harness, "after"), 3))
    return result


def format_heal_lines(perf: HealPerf) -> list[str]:
    """The report's lines for these measures (none when they were not taken)."""
    if not perf.heal_s:
        return []
    heal, select = statistics.median(perf.heal_s), statistics.median(perf.select_s)
    ratio = perf.heal_ratio()
    stages = ", ".join(f"{name} {s:.2f}" for name, s in perf.stage_medians().items())
    verify = statistics.median(perf.verify_s)
    extra = statistics.median(perf.checked_s) - verify
    data, sequential = perf.data_ratio(), perf.data_ratio(perf.sequential_s)
    n = len(perf.heal_s)
    return [
        f"heal (shop):   dbt exit -> verified branch {heal:.2f} s vs dbt build --select "
        f"{MODEL}+ {select:.2f} s = {ratio:.2f}x (target <= {HEAL_TARGET:g}x: "
        f"{_met(ratio <= HEAL_TARGET)}; medians of {n})",
        f"heal stages:   {stages} s",
        f"data check:    +{extra:.2f} s over a {verify:.2f} s trial (worktree, warm verify) = "
        f"{data:.2f}x (target <= {DATA_TARGET:g}x: {_met(data <= DATA_TARGET)}; baseline built "
        f"after the verify: {sequential:.2f}x; medians of {n})",
    ]


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"
