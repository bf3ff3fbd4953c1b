"""`patchit bench --perf`: how long verifying a fix takes, against re-running dbt by hand.

On a generated project (see genproject) committed in a temp git repo, one intermediate model
gets a column typo and the user's `dbt build` fails on it. Then, interleaved, K times each:

    full_build     `dbt build` of the whole project, fresh process (the obvious baseline)
    select_build   `dbt build --select <model>+`, fresh process
    warm_verify    DbtHarness(warm=True).verify of the right fix in a worktree, for
                   WARM_PER_RUN candidates a run (the first right after the run's builds,
                   also reported on its own): one sample per run is too few on a shared
                   machine whose speed moves by a third from minute to minute
    fresh_verify   DbtHarness(warm=False).verify of the same, once a run

The baselines run in a checkout of the fix with its own copy of the database and the user's
partial-parse file, as a user re-running dbt would. Each run's copy of the fix carries a
distinct trailing comment, so every run re-parses one changed file, as a new candidate does.
The warm worker's start is paid once, timed on its own and left out of warm_verify; so is the
incident's prefetch (`DbtHarness.prefetch`, which the loop starts with the worker while it
gathers evidence, and `snapshot_taken`, the snapshot's catalog read once it is made).

Each verify also says where its time went (`DbtHarness.last_breakdown_ms`): patchit's preparing (the
warehouse copy, the selection), dbt's phases inside the warm worker's run
(`patchit.harnesses.dbt.phases`: parse, graph, select, cache, run nodes, artifacts, the rest), the
worker's fork and reply, and the judging; the report prints the medians beside the totals. A
2,000-model project's builds take minutes, so a kept `--workdir` is reused by the next run of the
same size: the project, its failing run and the snapshot are taken as they are.

Then the wrapper's own cost on the example project (`patchit.bench.perf_wrapper`): a green
`patchit dbt -- build` against `dbt build`, and the idle tail of a failure with nothing to
verify (report line -> exit).

Then the warm worker's memory (`perf_rss`): its RSS after each of `rss_candidates` distinct
candidates verified in a row, flat or not; and, last in the report, issue 34's done-when table.

Then the screen before the harness (`DbtHarness.screen`: the changed model's SQL bound by
DuckDB against a schema-only clone of the snapshot): its one-off clone, and its cost per
candidate over `screen_candidates` candidates in one worktree, every other one with a column
that does not exist (screened out), each one distinct.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.bench.genproject import GeneratedProject, break_model, generate_project
from patchit.bench.perf_heal import HealPerf, format_heal_lines, run_heal_perf
from patchit.bench.perf_rss import format_done_when, format_rss_line, measure_rss
from patchit.bench.perf_wrapper import format_lines, run_wrapper_perf
from patchit.config import resolve_home
from patchit.errors import HarnessError, PatchitError
from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.harnesses.dbt.slice import snapshot_relations
from patchit.sandbox.git import run_git
from patchit.sandbox.snapshot import (
    PARTIAL_PARSE_FILE,
    copy_for_candidate,
    rebase_partial_parse,
    snapshot_database,
)
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home

MEASURES = ("full_build", "select_build", "warm_verify", "fresh_verify")
SCREEN_CANDIDATES = 50
RSS_CANDIDATES = 50  # verified on the warm worker in a row, its RSS read after each
SCREEN_TARGET_MS = 10.0  # the design's budget per SQL candidate, after the one-off clone
WARM_TARGET_X, WARM_TARGET_S = 20.0, 1.0  # warm verify: full build / verify, and seconds
WARM_PER_RUN = 3  # warm verifies (distinct candidates) a run; the median takes them all
LABELS = {
    "full_build": "full build",
    "select_build": "select build",
    "warm_verify": "warm verify",
    "fresh_verify": "fresh verify",
}
_GIT_ID = ("-c", "user.name=patchit bench", "-c", "user.email=bench@localhost")


@dataclass
class PerfResult:
    """Measured seconds per run (in run order) for each of MEASURES, plus the setting."""

    n_models: int
    n_tests: int
    runs: int
    broken_model: str
    selected_models: int
    samples_s: dict[str, list[float]] = field(default_factory=dict)
    # how each verify's dbt parsed ("partial" or "full: <reason>"), per verify measure
    parse_modes: dict[str, list[str]] = field(default_factory=dict)
    # where each verify's time went, part by part (`DbtHarness.last_breakdown_ms`), per run
    breakdowns_ms: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    worker_start_s: float = 0.0
    prefetch_s: float = 0.0  # the incident's reads done while its evidence is gathered
    initial_build_s: float = 0.0
    # the screen: ms per candidate (in run order), the first call (clone included), the
    # clone alone, and how many candidates it rejected
    screen_samples_ms: list[float] = field(default_factory=list)
    screen_first_ms: float = 0.0
    screen_clone_ms: float = 0.0
    screen_rejected: int = 0
    # the wrapper (perf_wrapper): green `dbt build` and `patchit dbt -- build` seconds, in run
    # order; the idle tail's seconds; processes the wrapped runs left behind
    green_dbt_s: list[float] = field(default_factory=list)
    green_wrapper_s: list[float] = field(default_factory=list)
    idle_tail_s: list[float] = field(default_factory=list)
    idle_leftover: int = 0
    cli_start_s: list[float] = field(default_factory=list)  # `patchit --help`
    # healing the example project and the data check's cost (perf_heal.HealPerf's fields)
    heal: dict[str, Any] = field(default_factory=dict)
    # the warm worker's RSS (kB) after each of `rss_candidates` verified candidates (perf_rss)
    rss_kb: list[int] = field(default_factory=list)
    rss_verify_s: list[float] = field(default_factory=list)  # those candidates' warm verifies
    warm_first_s: list[float] = field(default_factory=list)  # each run's first warm verify

    @property
    def screen_median_ms(self) -> float:
        return statistics.median(self.screen_samples_ms) if self.screen_samples_ms else 0.0

    def median_s(self, measure: str) -> float:
        return statistics.median(self.samples_s[measure])

    def ratio(self, measure: str) -> float:
        """This measure's median over the full build's: 0.05 is 20x faster."""
        return self.median_s(measure) / self.median_s("full_build")

    def breakdown_ms(self, measure: str) -> dict[str, float]:
        """The median milliseconds of each part of `measure`'s runs, in the order they run."""
        runs = self.breakdowns_ms.get(measure) or []
        parts = dict.fromkeys(part for run in runs for part in run)
        return {p: round(statistics.median(run.get(p, 0.0) for run in runs), 1) for p in parts}

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = asdict(self)
        data["breakdown_median_ms"] = {m: self.breakdown_ms(m) for m in self.breakdowns_ms}
        data["median_s"] = {m: round(self.median_s(m), 3) for m in MEASURES}
        data["ratio_to_full_build"] = {m: round(self.ratio(m), 4) for m in MEASURES}
        data["speedup"] = {m: round(1 / self.ratio(m), 2) for m in MEASURES}
        data["screen_median_ms"] = round(self.screen_median_ms, 2)
        if self.green_dbt_s and self.green_wrapper_s:
            data["green_wrapper_ratio"] = round(
                statistics.median(self.green_wrapper_s) / statistics.median(self.green_dbt_s), 4
            )
        if self.idle_tail_s:
            data["idle_tail_median_s"] = round(statistics.median(self.idle_tail_s), 3)
        return data


def format_report(result: PerfResult) -> str:
    """The table `patchit bench --perf` prints."""
    lines = [
        f"patchit bench --perf: {result.n_models} models, {result.n_tests} data tests; "
        f"broken {result.broken_model} ({result.selected_models} models in "
        f"{result.broken_model}+); medians of {result.runs} run(s)",
    ]
    for measure in MEASURES:
        label = f"{LABELS[measure]}:".ljust(14)
        seconds = result.median_s(measure)
        if measure == "full_build":
            lines.append(f"{label}{seconds:7.2f} s (baseline)")
            continue
        ratio = result.ratio(measure)
        pace = f"{1 / ratio:.1f}x faster" if ratio <= 1 else f"{ratio:.1f}x slower"
        line = f"{label}{seconds:7.2f} s = {ratio:.2f}x full build ({pace})"
        if measure == "warm_verify":
            met = 1 / ratio >= WARM_TARGET_X and seconds <= WARM_TARGET_S
            line += (
                f"; target >= {WARM_TARGET_X:g}x and <= {WARM_TARGET_S:g} s: "
                f"{'met' if met else 'NOT met'}"
            )
        lines.append(line)
        if measure == "warm_verify" and result.warm_first_s:
            first = statistics.median(result.warm_first_s)
            lines.append(
                f"{''.ljust(14)}(median of {len(result.samples_s[measure])} candidates, "
                f"{len(result.samples_s[measure]) // max(result.runs, 1)} a run; the first of "
                f"each run, right after its builds: {first:.2f} s)"
            )
    lines.append(
        f"{'worker start:'.ljust(14)}{result.worker_start_s:7.2f} s (one-off, not in warm verify)"
    )
    lines.append(
        f"{'prefetch:'.ljust(14)}{result.prefetch_s:7.2f} s (once per incident, while the loop "
        "gathers evidence: the failing run's manifest and parse read, the parse decoded in the "
        "worker, the snapshot's catalog read; not in warm verify)"
    )
    lines += format_rss_line(result.rss_kb, result.rss_verify_s)
    lines += format_breakdown(result)
    if result.screen_samples_ms:
        n = len(result.screen_samples_ms)
        per_verify = result.median_s("warm_verify") * 1000 / max(result.screen_median_ms, 1e-3)
        within = "within" if result.screen_median_ms <= SCREEN_TARGET_MS else "OVER"
        lines.append(
            f"{'screen:'.ljust(14)}{result.screen_median_ms:7.2f} ms per SQL candidate (median "
            f"of {n}, {result.screen_rejected} screened out; {within} the "
            f"{SCREEN_TARGET_MS:g} ms target) vs {result.median_s('warm_verify'):.2f} s for one "
            f"warm verify ({per_verify:,.0f}x)"
        )
        lines.append(
            f"{'screen clone:'.ljust(14)}{result.screen_clone_ms / 1000:7.2f} s (one-off per "
            f"incident; first candidate {result.screen_first_ms:.1f} ms with it)"
        )
    lines += format_done_when(result.to_json())  # before the wrapper's and heal's own lines
    lines += format_lines(
        result.green_dbt_s, result.green_wrapper_s, result.idle_tail_s, result.cli_start_s
    )
    if result.heal:
        lines += format_heal_lines(HealPerf(**result.heal))
    return "\n".join(lines)


def format_breakdown(result: PerfResult) -> list[str]:
    """Where a verify's time goes: one row per part, warm and fresh side by side (medians),
    and the memory run's warm verifies (`steady`: past the first candidate's one-off reads)."""
    columns = {"warm": "warm_verify", "fresh": "fresh_verify", "steady": "warm_steady"}
    by_column = {name: result.breakdown_ms(measure) for name, measure in columns.items()}
    by_column = {name: parts for name, parts in by_column.items() if parts or name != "steady"}
    if not any(by_column.values()):
        return []
    heads = "".join(f"{name:>8}" for name in by_column)
    title = "where a verify's time goes (median ms):"
    lines = [f"{title.ljust(40)}{heads}"]
    for part in dict.fromkeys(p for parts in by_column.values() for p in parts):
        cells = [f"{by[part]:8.0f}" if part in by else f"{'-':>8}" for by in by_column.values()]
        lines.append(f"  {part.ljust(38)}{''.join(cells)}")
    totals = [f"{sum(by.values()):8.0f}" for by in by_column.values()]
    lines.append(f"  {'total'.ljust(38)}{''.join(totals)}")
    return lines


def _dbt(project: Path, *args: str) -> tuple[int, str, float]:
    """One fresh `dbt` process in `project` (profiles.yml inside); (exit code, output, s)."""
    dbt = Path(sys.executable).parent / "dbt"
    executable = str(dbt) if dbt.is_file() else (shutil.which("dbt") or "dbt")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    started = time.monotonic()
    proc = subprocess.run(
        [executable, *args, "--profiles-dir", str(project)],
        cwd=project, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started


@contextmanager
def _patchit_home(home: Path) -> Iterator[None]:
    """The harness keeps its parse cache under $PATCHIT_HOME: keep the bench's in its temp dir."""
    before = os.environ.get("PATCHIT_HOME")
    os.environ["PATCHIT_HOME"] = str(home)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PATCHIT_HOME", None)
        else:
            os.environ["PATCHIT_HOME"] = before


class _Bench:
    """The temp repo, the failing run's event and the fix; one method per measure."""

    def __init__(self, work: Path, n_models: int, say: Callable[[str], None]) -> None:
        self.work, self.say = work, say
        self.repo = work / "repo"
        self.project: GeneratedProject = generate_project(self.repo, n_models)
        self.model = self.project.middle_model()
        self.fix_path = self.project.model_path(self.model)
        self.count = 0
        self.last_breakdown_ms: dict[str, float] = {}  # the last verify's, part by part

    def setup(self) -> float:
        """Build, commit and break the project, run the user's failing build; or, when a kept
        `--workdir` holds this project set up already, reuse it (a 2,000-model project's
        builds take minutes): 0.0 then stands for the initial build."""
        if self._reuse():
            return 0.0
        say, repo = self.say, self.repo
        say(f"building the generated {self.project.n_tests}-test project once")
        code, out, initial_s = _dbt(repo, "build")
        if code != 0:
            raise HarnessError(f"the generated project does not build:\n{out[-3000:]}")
        (repo / ".gitignore").write_text("target/\nlogs/\n*.duckdb*\n")
        run_git(repo, "init", "-q", "-b", "main")
        self._commit("bench: generated project")
        self.good, _ = break_model(self.project, self.model)
        self._commit(f"{self.model}: typo")
        say(f"breaking {self.model}; the user's `dbt build` fails on it")
        started = datetime.now(UTC)
        code, out, _ = _dbt(repo, "build")
        if code != 1 or "amout" not in out:
            raise HarnessError(f"the broken project did not fail as planned:\n{out[-3000:]}")
        self.event = UniversalFailureEvent(
            source=FailureSource.DBT,
            pipeline_id=self.project.name,
            unit_id=f"model.{self.project.name}.{self.model}",
            repo_path=str(repo),
            commit=run_git(repo, "rev-parse", "HEAD").strip(),
            artifacts={"manifest": str(repo / "target" / "manifest.json")},
            dbt=DbtInvocation(
                command="build", args=["build"], project_dir=str(repo), cwd=str(repo),
                started_utc=started,
            ),
        )  # fmt: skip
        self.snapshot = snapshot_database(repo / self.project.db_file, self.work / "snapshot")
        self._make_baseline()
        self._ready_file.write_text(
            json.dumps({"good": self.good, "event": self.event.model_dump(mode="json")}),
            encoding="utf-8",
        )
        return initial_s

    @property
    def _ready_file(self) -> Path:
        return self.work / f"ready-{len(self.project.models)}.json"

    def _make_baseline(self) -> None:
        self.baseline = create_worktree(self.repo, "HEAD", self.work / "baseline")
        copy_for_candidate(self.snapshot, self.baseline)
        rebase_partial_parse(
            self.repo / "target" / PARTIAL_PARSE_FILE, self.baseline / "target", self.baseline
        )

    def _reuse(self) -> bool:
        """Take the failing run of an earlier bench in this workdir, when the project it
        generated is this one (same size) and its repo is still at the broken commit."""
        try:
            kept = json.loads(self._ready_file.read_text(encoding="utf-8"))
            event = UniversalFailureEvent.model_validate(kept["event"])
            head = run_git(self.repo, "rev-parse", "HEAD").strip()
        except (OSError, ValueError, KeyError, PatchitError):
            return False
        snapshot = self.work / "snapshot" / self.project.db_file
        if event.commit != head or not snapshot.is_file():
            return False
        self.say(f"reusing the generated project and its failing run in {self.work}")
        run_git(self.repo, "checkout", "-q", "--", ".")  # generating again un-broke the model
        self.event, self.good, self.snapshot = event, str(kept["good"]), snapshot
        if (self.work / "baseline").exists():
            remove_worktree(self.repo, self.work / "baseline")
        self._make_baseline()
        return True

    def _commit(self, message: str) -> None:
        run_git(self.repo, "add", "-A")
        run_git(self.repo, *_GIT_ID, "commit", "-q", "-m", message)

    def _write_fix(self, root: Path) -> None:
        self.count += 1
        text = f"{self.good}-- patchit bench candidate {self.count}\n"
        (root / self.fix_path).write_text(text, encoding="utf-8")

    def baseline_build(self, *select: str) -> float:
        self._write_fix(self.baseline)
        code, out, seconds = _dbt(self.baseline, "build", *select)
        if code != 0:
            raise HarnessError(f"dbt build {' '.join(select)} of the fix failed:\n{out[-3000:]}")
        return seconds

    def verify(self, harness: DbtHarness) -> tuple[float, str]:
        number = self.count + 1
        # under $PATCHIT_HOME, where the loop puts them: inside the warm sandbox's areas
        root = create_worktree(self.repo, "HEAD", worktrees_home() / f"bench-c{number}")
        scratch = resolve_home() / "sandboxes" / f"bench-c{number}"
        try:
            self._write_fix(root)
            workspace = Workspace(root=root, scratch=scratch, snapshot=self.snapshot.parent)
            started = time.monotonic()
            result = harness.verify(workspace, self.event)
            seconds = time.monotonic() - started
        finally:
            remove_worktree(self.repo, root)
            shutil.rmtree(scratch, ignore_errors=True)
        if not result.passed:
            raise HarnessError(f"the right fix did not verify:\n{result.output[-3000:]}")
        self.last_breakdown_ms = dict(harness.last_breakdown_ms)
        return seconds, harness.last_parse_mode

    def screen(self, harness: DbtHarness, candidates: int, result: PerfResult) -> None:
        """Screen `candidates` distinct candidates in one worktree, every other one wrong; the
        first call builds the incident's clone."""
        root = create_worktree(self.repo, "HEAD", worktrees_home() / "bench-screen")
        workspace = Workspace(root=root, scratch=resolve_home() / "sandboxes" / "bench-screen",
                              snapshot=self.snapshot.parent)  # fmt: skip
        changed = [self.fix_path.as_posix()]
        try:
            for number in range(candidates + 1):
                wrong = number % 2 == 1
                text = self.good.replace("a.amount", f"a.amount_{number}" if wrong else "a.amount")
                (root / self.fix_path).write_text(f"{text}-- candidate {number}\n", "utf-8")
                started = time.perf_counter()
                screening = harness.screen(workspace, self.event, changed)
                elapsed_ms = (time.perf_counter() - started) * 1000
                if screening.passed == wrong or screening.skipped:
                    raise HarnessError(f"the screen misjudged candidate {number}: {screening}")
                if number == 0:
                    result.screen_first_ms = round(elapsed_ms, 2)
                    result.screen_clone_ms = harness.screener.clone_ms
                    continue
                result.screen_samples_ms.append(round(elapsed_ms, 3))
                result.screen_rejected += wrong
        finally:
            remove_worktree(self.repo, root)


def run_perf(
    n_models: int = 200,
    runs: int = 3,
    workdir: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
    screen_candidates: int = SCREEN_CANDIDATES,
    wrapper_runs: int | None = None,
    heal_runs: int | None = None,
    rss_candidates: int = RSS_CANDIDATES,
) -> PerfResult:
    """Generate, break and time as the module docstring says; the temp dir is removed after
    unless `workdir` is given. `wrapper_runs`: green pairs of the wrapper's measure (default
    min(runs, 3); 0 leaves the wrapper out); `heal_runs`: the same for healing the example
    project and the data check (`perf_heal`); `rss_candidates`: candidates verified in a row on
    the warm worker for its memory (`perf_rss`; 0 leaves it out)."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    wrapper_runs = min(runs, 3) if wrapper_runs is None else wrapper_runs
    heal_runs = min(runs, 3) if heal_runs is None else heal_runs
    work = Path(tempfile.mkdtemp(prefix="patchit-bench-")) if workdir is None else workdir
    work.mkdir(parents=True, exist_ok=True)
    try:
        with _patchit_home(work / "home"):
            bench = _Bench(work.resolve(), n_models, say)
            result = _measure(bench, runs, say, screen_candidates, rss_candidates)
        if wrapper_runs > 0:
            wrapper = run_wrapper_perf(work.resolve() / "wrapper", wrapper_runs, say)
            result.green_dbt_s, result.green_wrapper_s = wrapper.dbt_s, wrapper.wrapper_s
            result.cli_start_s = wrapper.cli_s
            result.idle_tail_s, result.idle_leftover = wrapper.tail_s, wrapper.leftover
        if heal_runs > 0:
            with _patchit_home(work / "heal-home"):
                healed = run_heal_perf(work.resolve() / "heal", heal_runs, say)
            result.heal = asdict(healed)
        return result
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _measure(
    bench: _Bench,
    runs: int,
    say: Callable[[str], None],
    screen_candidates: int,
    rss_candidates: int = 0,
) -> PerfResult:
    initial_s = bench.setup()
    project = bench.project
    result = PerfResult(
        n_models=len(project.models),
        n_tests=project.n_tests,
        runs=runs,
        broken_model=bench.model,
        selected_models=1 + len(project.descendants(bench.model)),
        samples_s={m: [] for m in MEASURES},
        parse_modes={"warm_verify": [], "fresh_verify": []},
        breakdowns_ms={"warm_verify": [], "fresh_verify": []},
        initial_build_s=round(initial_s, 3),
    )
    with DbtHarness(warm=True) as warm, DbtHarness(warm=False) as fresh:
        say("starting the warm dbt worker")
        started = time.monotonic()
        warm.start()
        result.worker_start_s = round(time.monotonic() - started, 3)
        started = time.monotonic()
        warm.prefetch(bench.event)  # as the loop's warm_up(event) does at an incident's start
        snapshot_relations(bench.snapshot)  # as `snapshot_taken` does once the loop made it
        result.prefetch_s = round(time.monotonic() - started, 3)
        for run in range(1, runs + 1):
            say(f"run {run}/{runs}")
            samples = result.samples_s
            samples["full_build"].append(round(bench.baseline_build(), 3))
            samples["select_build"].append(
                round(bench.baseline_build("--select", f"{bench.model}+"), 3)
            )
            warm_s = [_sample(result, bench, "warm_verify", warm) for _ in range(WARM_PER_RUN)]
            result.warm_first_s.append(warm_s[0])
            _sample(result, bench, "fresh_verify", fresh)
        if rss_candidates:
            measured = measure_rss(bench, warm, rss_candidates, say)
            result.rss_kb, result.rss_verify_s, result.breakdowns_ms["warm_steady"] = measured
        if screen_candidates:
            say(f"screening {screen_candidates} candidates")
            bench.screen(warm, screen_candidates, result)
    return result


def _sample(result: PerfResult, bench: _Bench, measure: str, harness: DbtHarness) -> float:
    """One verify of `measure`, its seconds, parse mode and breakdown kept in `result`."""
    seconds, parse_mode = bench.verify(harness)
    result.samples_s[measure].append(round(seconds, 3))
    result.parse_modes[measure].append(parse_mode)
    result.breakdowns_ms[measure].append(bench.last_breakdown_ms)
    return round(seconds, 3)


def dump_json(result: PerfResult) -> str:
    return json.dumps(result.to_json(), indent=2)
