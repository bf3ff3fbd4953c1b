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
