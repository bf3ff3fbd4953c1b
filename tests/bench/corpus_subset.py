"""`patchit bench --only ...` as the CI subsets run it: real dbt, Airflow, git and patchit
subprocesses. The subset is split by file (tests/bench/test_corpus_quick*.py) so that
pytest-xdist's `--dist loadfile` runs its parts on different workers.

Which scenarios make the subset is a rule, not a list of names: one scenario per expected
verdict of a kind (`ci_sample`). A list grew by one scenario per new fix-it and took the
suite's longest fixture to seven minutes; each fix-it is proven by its own tests
(tests/patching), the whole corpus by `patchit bench`. The sample keeps the runner's and the
judge's every path honest on each change: a fix with its branch and hidden check, an
escalation, a trap refused, on dbt and under Airflow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from patchit.bench.corpus import DEFAULT_CORPUS
from patchit.bench.corpus_model import Expect, Kind, Scenario, load_corpus

VERDICTS: tuple[Expect, ...] = ("fixed", "escalated", "refused")


def ci_sample(kind: Kind, verdicts: tuple[Expect, ...] = VERDICTS) -> tuple[Scenario, ...]:
    """For each of `verdicts`, the corpus's first scenario (in name order) of `kind` expected to
    end so: a new scenario joins the sample only by sorting first in its class."""
    scenarios = [s for s in load_corpus(DEFAULT_CORPUS) if s.kind == kind]
    sample = tuple(next(s for s in scenarios if s.expect == verdict) for verdict in verdicts)
    return sample


def bench_subset(names: tuple[str, ...], results: Path) -> dict[str, Any]:
    """`patchit bench --only <names> --json --results <results>`: its JSON, with its exit code,
    stderr and results dir under `_exit`, `_stderr` and `_results`."""
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "bench", "--only", ",".join(names), "--json",
         "--results", str(results)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    data: dict[str, Any] = json.loads(proc.stdout)
    data["_exit"], data["_stderr"], data["_results"] = proc.returncode, proc.stderr, results
    return data


def by_name(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in run["scenarios"]}


def assert_fixed_offline(row: dict[str, Any]) -> None:
    """A code bug fixed by tier 0 alone, its branch reproducing the good commit's values."""
    assert (row["outcome"], row["classification"]) == ("fixed", "code_bug"), row
    assert row["hidden_check"] == "match" and row["branch"].startswith("patchit/")
    assert row["tiers"] == [0] and row["tokens"] == 0  # offline: tier 0 alone
    assert row["passed"] and row["time_to_final_s"] > 0


def assert_as_expected(scenario: Scenario, row: dict[str, Any]) -> None:
    """The row of `scenario` ended as the scenario expects, judged from outside."""
    assert row["passed"] and row["error"] is None, row
    assert row["untouched"] and row["touched"] == [] and row["broken_fails"], row
    if scenario.expect == "fixed":
        assert_fixed_offline(row)
    elif scenario.expect == "escalated":
        assert (row["outcome"], row["classification"]) == ("escalated", scenario.expect_class)
        assert row["hidden_check"] == "n/a" and row["branch"] is None, row
    else:  # a trap: whatever patchit concluded, no branch and no wrong fix
        assert row["outcome"] != "fixed" and row["branch"] is None, row
        assert not row["wrong_fix"], row


def assert_summary_adds_up(sample: tuple[Scenario, ...], run: dict[str, Any]) -> None:
    """The run's summary counts the sample's verdicts, and the results files hold them."""
    expects = [s.expect for s in sample]
    summary = run["summary"]
    assert [r["name"] for r in run["scenarios"]] == sorted(s.name for s in sample)
    assert summary["scenarios"] == len(sample) == summary["passed"], summary
    assert summary["wrong_fixes"] == 0 and summary["runner_errors"] == 0
    assert summary["user_tree_touches"] == 0
    assert summary["code_bugs"] == summary["code_bugs_fixed"] == expects.count("fixed")
    assert summary["escalations"] == expects.count("escalated")
    if "escalated" in expects:
        assert summary["escalation_accuracy"] == 1.0
    assert summary["traps"] == summary["traps_passed"] == sum(s.trap for s in sample)
    assert run["_exit"] == 0
    written = json.loads((run["_results"] / "subset.json").read_text())
    assert written["summary"]["passed"] == len(sample)
    table = (Path(run["_results"]) / "subset.md").read_text()
    for scenario in sample:
        if scenario.expect == "fixed":
            assert f"| {scenario.name} | {scenario.kind} | fixed | fixed | - | - | code_bug |" in (
                table
            )
