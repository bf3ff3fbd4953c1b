"""`check_candidate`: does a green candidate produce the outputs the last good commit did,
except where the breaking change meant them to differ?

The loop calls it for each candidate whose harness run passed, with the candidate's worktree
still in place. The baseline (see `baseline`) is built once per incident under `work` and
reused by later candidates; its second run, which tells unstable outputs apart, is made only
when a candidate differs. Nothing here writes to the user's repository or database.
"""

from __future__ import annotations

from pathlib import Path

from patchit.errors import PatchitError
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.fidelity import airflow_data, dbt_check
from patchit.fidelity.ahead import BaselineAhead
from patchit.fidelity.baseline import Baseline, BaselineRunner
from patchit.fidelity.meant import (
    Meant,
    breaking_diff,
    patch_added_lines,
    patch_removed_lines,
)
from patchit.fidelity.model import DataCheck, OutputDiff
from patchit.fidelity.outputs import airflow_outputs, dbt_outputs, project_folder
from patchit.harnesses.base import Harness, Verification, Workspace
from patchit.sandbox.dbt_profile import resolve_dbt_target
from patchit.sandbox.postgres import is_postgres
from patchit.sandbox.snowflake import is_snowflake

MAX_NAMED = 6


def check_candidate(
    event: UniversalFailureEvent,
    evidence: Evidence | None,
    repo: Path,
    harness: Harness,
    candidate_ws: Workspace,
    candidate_result: Verification,
    *,
    baseline_commit: str | None,
    work: Path,
    ahead: BaselineAhead | None = None,
) -> DataCheck:
    """Compare the candidate's outputs with the baseline's; never raises a PatchitError (a
    check that cannot run says so, and asks for review). `ahead`: the baseline's build
    started beside the candidate's verification (`patchit.fidelity.ahead`), awaited first."""
    check = DataCheck(status="not_run", harness=harness.name, isolation=candidate_result.isolation)
    kind = _kind(event, harness)
    if not candidate_result.passed:
        check.summary = "not run: the candidate did not pass"
        return check
    if kind is None:
        check.summary = f"not run: the {harness.name} harness has no data check"
        return check
    if event.status == "import_error":
        check.kind, check.summary = "airflow", "not run: a DAG import check writes no outputs"
        return check
    check.kind = "dbt" if kind == "dbt" else "airflow"
    if kind == "dbt" and not _has_database(event):
        check.summary = "not run: the dbt target keeps no database file to compare"
        return check
    remembered = remembered_commit(evidence, baseline_commit)
    if ahead is not None:
        ahead.wait()  # the baseline built beside the first candidate: read below from `work`
    try:
        runner = BaselineRunner(event, repo, harness, candidate_ws.snapshot, work)
        baseline, why = runner.first(remembered)
        if baseline is None:
            check.status = "no_baseline"
            check.summary = f"no good baseline, outputs not compared: {why}"
            return check
        check.baseline_commit, check.baseline_source = baseline.commit, baseline.source
        failing = event.commit or "HEAD"
        added = patch_added_lines(candidate_ws.root)
        meant = breaking_diff(
            repo, baseline.commit, failing, patch_removed_lines(candidate_ws.root), added
        )
        if kind == "dbt":
            project = candidate_ws.root / project_folder(event)
            code_only = dbt_check.edits_only_code(added) and not dbt_check.has_run_hooks(project)
            _check_dbt(
                check, event, runner, baseline, candidate_ws, candidate_result, meant, code_only
            )
        else:
            _check_airflow(check, runner, baseline, candidate_ws, candidate_result, meant)
    except PatchitError as exc:
        check.status, check.needs_review = "error", True
        check.summary = f"the data check could not run: {exc}"
        return check
    check.baseline_runs = len(baseline.runs)
    _conclude(check)
    if unjudged := check.unjudged():  # new outputs: no baseline says what they should hold
        check.summary += f"; {unjudged}"
    return check


def _kind(event: UniversalFailureEvent, harness: Harness) -> str | None:
    if event.dbt is not None and harness.name == "dbt":
        return "dbt"
    return "airflow" if harness.name == "airflow" else None


def remembered_commit(evidence: Evidence | None, baseline_commit: str | None) -> str | None:
    """The last good commit the baseline is tried at first (then the failing one's parent)."""
    return baseline_commit or (evidence.last_good_commit if evidence else None)


def compares_outputs(event: UniversalFailureEvent, harness: Harness) -> bool:
    """Whether a passing candidate's data check builds a baseline and compares (else it is
    not run, whatever the candidate does)."""
    kind = _kind(event, harness)
    if kind is None or event.status == "import_error":
        return False
    return kind != "dbt" or _has_database(event)


def _has_database(event: UniversalFailureEvent) -> bool:
    try:
        target = resolve_dbt_target(event)
        return (
            target.db_path is not None or is_postgres(target.output) or is_snowflake(target.output)
        )
    except PatchitError:
        return True  # the harness ran with it; let the check say what is wrong


def _check_dbt(
    check: DataCheck,
    event: UniversalFailureEvent,
    runner: BaselineRunner,
    baseline: Baseline,
    candidate_ws: Workspace,
    candidate_result: Verification,
    meant: Meant,
    code_only: bool,
) -> None:
    cand = dbt_outputs(candidate_ws, event, candidate_result, keep=None)
    first = dbt_outputs(candidate_ws, event, baseline.runs[0], keep=None)
    compared = dbt_check.compare_runs(first, cand, meant.renamed)
    unstable: dict[str, set[str]] = {}
    if any(c.raw.differs for c in compared.values()):
        second = dbt_outputs(candidate_ws, event, runner.second(baseline), keep=None)
        unstable = dbt_check.unstable_columns(first, second, list(compared))
    check.outputs, check.meant_to_differ = dbt_check.judge(compared, unstable, meant, code_only)
    check.unstable_excluded = {
        compared[uid].raw.label: sorted(c for c in cols if c in compared[uid].raw.columns())
        for uid, cols in unstable.items()
        if uid in compared
    }
    if same_inputs := [o for o in check.outputs if o.nondeterministic]:
        check.unstable_excluded.update({o.name: o.unstable for o in same_inputs})
        check.notes.append(
            f"excluded as unstable: {len(same_inputs)} relation(s) that differ though both runs "
            "built them from the same SQL and config over the same inputs (ties in a window or "
            "a limit, float sums added in another order, now()): "
            f"{_names(same_inputs, 'unstable', False)}"
        )
    dbt_check.add_samples(first, cand, check.outputs)


def _check_airflow(
    check: DataCheck,
    runner: BaselineRunner,
    baseline: Baseline,
    candidate_ws: Workspace,
    candidate_result: Verification,
    meant: Meant,
) -> None:
    cand = airflow_outputs(candidate_ws, candidate_result)
    first = airflow_outputs(candidate_ws, baseline.runs[0])
    unstable: set[tuple[str, str]] = set()
    if airflow_data.differing(first, cand):
        second = airflow_outputs(candidate_ws, runner.second(baseline))
        unstable = airflow_data.differing(first, second)
    check.outputs = airflow_data.compare_outputs(first, cand, unstable, meant)
    check.unstable_excluded = {f"{kind} {name}": ["value"] for kind, name in sorted(unstable)}
    check.meant_to_differ = {o.name: o.meant for o in check.outputs if o.verdict == "meant"}


def _names(outputs: list[OutputDiff], verdict: str, columns: bool) -> str:
    picked = [o for o in outputs if o.verdict == verdict]
    parts = []
    for out in picked[:MAX_NAMED]:
        cols = out.unexpected if verdict == "unexpected" else out.meant
        parts.append(f"{out.name} ({', '.join(cols)})" if columns and cols else out.name)
    more = f" and {len(picked) - MAX_NAMED} more" if len(picked) > MAX_NAMED else ""
    return ", ".join(parts) + more


def _conclude(check: DataCheck) -> None:
    """Status, needs_review and the one-line summary from the per-output verdicts."""
    base = f"baseline {check.baseline_commit[:12] if check.baseline_commit else '?'}"
    outs = check.outputs
    unit = "relation(s)" if check.kind == "dbt" else "output(s)"
    unstable = sum(o.verdict == "unstable" or bool(o.unstable) for o in outs)
    tail = f"; {unstable} with unstable values excluded" if unstable else ""
    if all(o.verdict in ("same", "unstable") for o in outs):
        check.status = "same"
        check.summary = f"same as {base} ({check.baseline_source}): {len(outs)} {unit}{tail}"
        return
    check.status = "differs"
    check.needs_review = any(o.verdict == "unexpected" for o in outs)
    if check.needs_review:
        check.summary = (
            f"NEEDS REVIEW: outputs differ from {base} where the breaking change did not "
            f"mean them to: {_names(outs, 'unexpected', True)}"
        )
        return
    propagated = sum(o.verdict == "propagated" for o in outs)
    prop = f"; {propagated} downstream {unit} follow from it" if propagated else ""
    check.summary = (
        f"differs from {base} only where the breaking change meant: "
        f"{_names(outs, 'meant', True)}{prop}{tail}"
    )
