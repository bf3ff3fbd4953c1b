"""Verdicts on Airflow outputs as the runner records them (XCom and file hashes)."""

from __future__ import annotations

from patchit.fidelity.airflow_data import compare_outputs, differing
from patchit.fidelity.meant import Meant


def _run(total: str, report: str, stamp: str) -> dict[str, object]:
    return {
        "xcom": {"t.return_value": total, "t.stamp": stamp},
        "xcom_text": {"t.return_value": f"total {total}", "t.stamp": stamp},
        "files": {"root/out/report.csv": report},
        "files_head": {"root/out/report.csv": f"report {report}"},
    }


def test_meant_unstable_and_unexpected_outputs() -> None:
    base, again = _run("a", "r1", "s1"), _run("a", "r1", "s2")
    cand = _run("b", "r2", "s3")
    unstable = differing(base, again)
    assert unstable == {("xcom", "t.stamp")}
    # the breaking commit changed a `return` line on purpose; report.csv is not named anywhere
    meant = Meant(kept={"dags/d.py": ["    return total * 100"]})
    verdicts = {o.name: o for o in compare_outputs(base, cand, unstable, meant)}
    assert verdicts["t.return_value"].verdict == "meant"
    assert verdicts["t.stamp"].verdict == "unstable"
    report = verdicts["root/out/report.csv"]
    assert report.verdict == "unexpected"
    assert report.sample == "baseline:  report r1\ncandidate: report r2"
    # a file the candidate no longer writes is missing, and named as such
    gone = compare_outputs(base, {**cand, "files": {}}, unstable, Meant())
    assert {o.name: o.missing_in for o in gone}["root/out/report.csv"] == "candidate"


def test_a_new_file_a_repaired_line_still_writes_is_meant() -> None:
    """The change added `sha256sum ... > {{ execution_date | ds }}/d.sha256` (the bug and the
    new output on one line); the forward fix rewrites that line and still writes the file."""
    base = {"files": {}, "xcom": {}}
    cand = {"files": {"root/out/d.sha256": "h"}, "files_head": {}, "xcom": {}}
    line = "'> \"$OUT/{{ execution_date | ds }}/d.sha256\"'"
    meant = Meant(
        repaired={"dags/d.py": [line]},
        patched={"dags/d.py": [line.replace("execution_date", "logical_date")]},
    )
    (out,) = compare_outputs(base, cand, set(), meant)
    assert (out.missing_in, out.verdict) == ("baseline", "meant")
    # a candidate that no longer names it, or a name the change took from an old line, is not
    for other in (
        Meant(repaired=meant.repaired, patched={"dags/d.py": ["'true'"]}),
        Meant(repaired=meant.repaired, patched=meant.patched, removed={"dags/d.py": [line]}),
    ):
        (out,) = compare_outputs(base, cand, set(), other)
        assert out.verdict == "unexpected"
    # an output the baseline had is compared as before: a repaired line does not excuse it
    changed = compare_outputs({**cand, "files": {"root/out/d.sha256": "g"}}, cand, set(), meant)
    assert changed[0].verdict == "unexpected"
