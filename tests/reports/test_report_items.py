"""What every Root Cause Report must say, rendered from model objects (no git, dbt or Airflow):
the breaking change's hunks in the unit's files, true next actions, a conversion error's
column and values, and a "Why" that is never empty, whatever the class or the stop."""

from __future__ import annotations

import re
import string
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from patchit.classify.airflow_signatures import AIRFLOW_SIGNATURES
from patchit.classify.model import FailureClass, Verdict
from patchit.classify.signatures import SIGNATURES
from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.model import ConversionFinding, Evidence, TracebackFrame
from patchit.loop.loop import NOT_CODE
from patchit.loop.search import CANDIDATE_NEEDS_REVIEW, NEEDS_REVIEW
from patchit.loop.trial import CANNOT_VERIFY_NETWORK
from patchit.memory import Incident
from patchit.reports.build import build_report
from patchit.reports.model import RootCauseReport
from patchit.reports.render import render_markdown

GOOD = "a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6a7b8c9d0"
FAILING = "f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9"

MODEL_DIFF = """\
diff --git a/models/marts/daily_revenue.sql b/models/marts/daily_revenue.sql
index 1111111..2222222 100644
--- a/models/marts/daily_revenue.sql
+++ b/models/marts/daily_revenue.sql
@@ -1,3 +1,3 @@
 select order_date,
-    sum(amount) as revenue
+    sum(amout) as revenue
 from {{ ref('orders') }}
"""
OTHER_DIFF = """\
diff --git a/models/marts/customers.sql b/models/marts/customers.sql
index 3333333..4444444 100644
--- a/models/marts/customers.sql
+++ b/models/marts/customers.sql
@@ -1,2 +1,2 @@
-select 1 as id
+select 2 as id
"""
SEED_DIFF = """\
diff --git a/seeds/raw_orders.csv b/seeds/raw_orders.csv
index 5555555..6666666 100644
--- a/seeds/raw_orders.csv
+++ b/seeds/raw_orders.csv
@@ -1,3 +1,3 @@
 order_id,customer_id,amount_cents
-1,10,1250
+1,10,n/a
 2,11,300
"""


def _incident(status: str = "escalated", branch: str | None = None) -> Incident:
    now = datetime.now(UTC)
    return Incident(id="20261126-abcdef", fingerprint="f" * 16, cause_key="k", status=status,
                    branch=branch, created_utc=now, updated_utc=now)  # fmt: skip


def _dbt_event(**update: Any) -> UniversalFailureEvent:
    fields: dict[str, Any] = {
        "source": FailureSource.DBT,
        "pipeline_id": "shop",
        "unit_id": "model.shop.daily_revenue",
        "unit_path": "models/marts/daily_revenue.sql",
        "error_type": "Binder Error",
        "error_message": 'Binder Error: Referenced column "amout" not found',
        "repo_path": "/srv/shop",
        "commit": FAILING,
        "log_location": "/srv/shop/logs/dbt.log",
        "dbt": DbtInvocation(command="build", project_dir="/srv/shop", cwd="/srv/shop",
                             profiles_dir="/srv/shop/ci-profiles", target="ci"),
    }  # fmt: skip
    return UniversalFailureEvent(**{**fields, **update})


def _evidence(event: UniversalFailureEvent, **update: Any) -> Evidence:
    fields: dict[str, Any] = {
        "event": event,
        "repo_root": "/srv/shop",
        "project_dir": ".",
        "unit_path": event.unit_path,
        "unit_name": event.unit_id.rpartition(".")[2],
        "raw_code": "select order_date, sum(amout) as revenue from {{ ref('orders') }}\n",
        "changed_files": ["models/marts/daily_revenue.sql", "models/marts/customers.sql"],
        "last_good_commit": GOOD,
        "change_base": GOOD,
        "breaking_diff": MODEL_DIFF + OTHER_DIFF,
    }
    return Evidence(**{**fields, **update})


def _verdict(cls: FailureClass = FailureClass.CODE_BUG, reason: str = "the SQL broke.") -> Verdict:
    return Verdict(cls=cls, signature="sql_error", reason=reason, next_actions=[])


def _report(
    event: UniversalFailureEvent,
    evidence: Evidence | None,
    verdict: Verdict | None,
    *,
    status: str = "escalated",
    stop: str = "",
) -> RootCauseReport:
    return build_report(
        incident=_incident(status), event=event, evidence=evidence, verdict=verdict,
        attempts=[], winner=None, stop_reason=stop, commands=[], events=1,
    )  # fmt: skip


def _section(markdown: str, title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert found is not None, f"no section {title!r} in:\n{markdown}"
    return found.group(1).strip()


# -- the breaking change's hunks ----------------------------------------------------------


def test_the_report_shows_the_hunks_of_the_breaking_change_in_the_units_files() -> None:
    event = _dbt_event()
    report = _report(event, _evidence(event), _verdict())
    assert report.change_range == f"{GOOD[:12]}..{FAILING[:12]}"
    assert report.unit_files == ["models/marts/daily_revenue.sql"]
    section = _section(render_markdown(report), "The breaking change")
    assert f"`{GOOD[:12]}..{FAILING[:12]}`" in section
    assert "-    sum(amount) as revenue\n+    sum(amout) as revenue" in section
    assert "customers.sql" not in section  # changed, but not a file this unit depends on


def test_changed_data_files_are_shown_with_the_units_hunks() -> None:
    event = _dbt_event()
    evidence = _evidence(event, changed_files=["seeds/raw_orders.csv"], breaking_diff=SEED_DIFF)
    section = _section(render_markdown(_report(event, evidence, _verdict())), "The breaking change")
    assert "`seeds/raw_orders.csv`" in section
    assert "+1,10,n/a" in section


def test_a_change_that_touches_none_of_the_units_files_says_so() -> None:
    event = _dbt_event()
    evidence = _evidence(event, changed_files=["models/marts/customers.sql"],
                         breaking_diff=OTHER_DIFF)  # fmt: skip
    section = _section(render_markdown(_report(event, evidence, _verdict())), "The breaking change")
    assert "touched none of the files `model.shop.daily_revenue` depends on" in section
    assert "`models/marts/customers.sql`" in section


def test_no_history_is_said_not_hidden() -> None:
    event = _dbt_event()
    evidence = _evidence(event, changed_files=[], breaking_diff="", change_base=None,
                         last_good_commit=None)  # fmt: skip
    section = _section(render_markdown(_report(event, evidence, _verdict())), "The breaking change")
    assert section.startswith("No breaking change could be read")


def test_airflow_hunks_cover_the_dag_file_and_the_modules_the_traceback_names() -> None:
    helper = MODEL_DIFF.replace("models/marts/daily_revenue.sql", "dags/lib/money.py")
    other = OTHER_DIFF.replace("models/marts/customers.sql", "dags/unrelated.py")
    event = UniversalFailureEvent(source=FailureSource.AIRFLOW, pipeline_id="orders",
                                  unit_id="load", unit_path="dags/orders.py", commit=FAILING,
                                  repo_path="/srv/etl", error_type="KeyError",
                                  error_message="'amout'")  # fmt: skip
    evidence = Evidence(
        event=event, repo_root="/srv/etl", unit_path="dags/orders.py", change_base=GOOD,
        changed_files=["dags/lib/money.py", "dags/unrelated.py"], breaking_diff=helper + other,
        frames=[TracebackFrame(path="dags/lib/money.py", line=2, function="total")],
    )  # fmt: skip
    report = _report(event, evidence, _verdict())
    assert report.unit_files == ["dags/lib/money.py"]
    assert "dags/unrelated.py" not in report.unit_hunks


# -- next actions -------------------------------------------------------------------------


def test_next_actions_name_the_good_commit_and_the_users_profiles_dir() -> None:
    event = _dbt_event()
    actions = _report(event, _evidence(event), _verdict()).next_actions
    text = "\n".join(actions)
    assert f"git diff {GOOD[:12]}..{FAILING[:12]} -- models/marts/daily_revenue.sql" in actions
    assert f"git show {GOOD[:12]}:models/marts/daily_revenue.sql" in text
    assert "HEAD" not in text
    rerun = next(a for a in actions if a.startswith("re-run it:"))
    assert rerun.endswith("dbt build --select daily_revenue --profiles-dir "
                          "/srv/shop/ci-profiles --target ci")  # fmt: skip
    assert "~/.dbt" not in text


def test_the_classifier_actions_use_the_good_commit_and_the_profiles_dir() -> None:
    from patchit.classify.classifier import classify_failure

    event = _dbt_event(
        error_message="Could not find profile named 'shop'",
        error_type="Runtime Error",
        unit_id="project.shop",
        unit_path=None,
    )
    verdict = classify_failure(_evidence(event))
    assert verdict.signature == "missing_profile"
    text = "\n".join(verdict.next_actions)
    assert "/srv/shop/ci-profiles/profiles.yml" in text
    assert "~/.dbt" not in text and "pass --profiles-dir" not in text
    seeded = _dbt_event(error_message="Runtime Error in seed x: something", status="error")
    evidence = _evidence(seeded, changed_files=["seeds/raw_orders.csv"], breaking_diff=SEED_DIFF)
    data = classify_failure(evidence)
    assert data.signature == "data_files_changed"
    assert f"git diff {GOOD[:12]}..{FAILING[:12]} -- seeds/raw_orders.csv" in data.next_actions


def test_without_a_last_good_commit_the_parent_is_named_not_head() -> None:
    from patchit.classify.classifier import classify_failure

    event = _dbt_event(error_message="Runtime Error in seed x: something")
    evidence = _evidence(event, changed_files=["seeds/raw_orders.csv"], breaking_diff=SEED_DIFF,
                         last_good_commit=None, change_base=None)  # fmt: skip
    actions = classify_failure(evidence).next_actions
    assert f"git diff {FAILING[:12]}~1..{FAILING[:12]} -- seeds/raw_orders.csv" in actions


def test_no_log_url_for_a_run_that_has_none() -> None:
    event = UniversalFailureEvent(source=FailureSource.AIRFLOW, pipeline_id="orders",
                                  unit_id="load", unit_path="dags/orders.py", commit=FAILING,
                                  status="import_error", error_type="SyntaxError",
                                  error_message="invalid syntax")  # fmt: skip
    report = _report(event, None, _verdict())
    assert not any("log" in a and "://" in a for a in report.next_actions)


def test_a_yaml_units_next_action_is_a_parse_not_a_build() -> None:
    event = _dbt_event(unit_id="file:models/staging/schema.yml",
                       unit_path="models/staging/schema.yml", status="parse_error")  # fmt: skip
    actions = _report(event, _evidence(event), _verdict()).next_actions
    assert (
        "re-parse it: cd /srv/shop && dbt parse --profiles-dir /srv/shop/ci-profiles "
        "--target ci" in actions
    )
    assert not any("dbt build --select" in a for a in actions)


# -- a conversion error -------------------------------------------------------------------


def test_a_conversion_error_names_the_column_and_shows_offending_values() -> None:
    event = _dbt_event(error_message="Conversion Error: Could not convert string 'n/a' to INT32")
    finding = ConversionFinding(value="n/a", target_type="INTEGER", column="tax_cents",
                                relation="shop.main.raw_invoices", column_type="VARCHAR",
                                samples=["n/a", "unknown"])  # fmt: skip
    report = _report(event, _evidence(event, conversion=finding), _verdict(FailureClass.DATA_ISSUE))
    failed = _section(render_markdown(report), "What failed")
    assert "column `tax_cents` of `shop.main.raw_invoices` (type VARCHAR there)" in failed
    assert "Offending values: `n/a`, `unknown`." in failed
    assert report.model_dump(mode="json")["conversion"]["column"] == "tax_cents"


# -- "Why" is never empty -----------------------------------------------------------------

STOPS = [
    *(NOT_CODE.format(cls=c.value) for c in FailureClass if c is not FailureClass.CODE_BUG),
    "no strategy proposed a patch for this failure",
    "none of the 3 candidate(s) passed pre-check and verification",
    NEEDS_REVIEW,
    CANDIDATE_NEEDS_REVIEW.format(review="it drops code the breaking change added"),
    CANNOT_VERIFY_NETWORK,
    "max attempts (6) for this fingerprint reached",
    "patchit could not finish: git worktree add failed",
    "",
]


class _Blank(string.Formatter):
    def get_value(self, key: Any, args: Any, kwargs: Any) -> str:
        return ""


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("cls", list(FailureClass))
@pytest.mark.parametrize("source", ["dbt", "airflow"])
def test_why_is_never_empty_for_any_class_and_stop(stop: str, cls: FailureClass,
                                                    source: str) -> None:  # fmt: skip
    event = _dbt_event() if source == "dbt" else _dbt_event(source=FailureSource.AIRFLOW, dbt=None)
    for verdict in (_verdict(cls, reason=f"{cls.value} because."), _verdict(cls, reason=" "), None):
        for evidence in (_evidence(event), None):
            status = "fixed" if not stop else "escalated"
            report = _report(event, evidence, verdict, status=status, stop=stop)
            markdown = render_markdown(report)
            why = _section(markdown, "Why")
            assert why and not why.startswith("**Stopped:**"), why
            assert _section(markdown, "The breaking change")
            assert "\n\n\n" not in markdown
            assert report.next_actions


@pytest.mark.parametrize("sig", [*SIGNATURES, *AIRFLOW_SIGNATURES], ids=lambda s: s.name)
def test_every_signatures_reason_says_something_even_with_blank_fields(sig: Any) -> None:
    assert _Blank().format(sig.reason).strip(" .;:(),'")


def test_reports_rewritten_at_once_by_several_workers_never_fail(tmp_path: Path) -> None:
    """Two workers re-render one incident's report at the same time (a recurrence each): each
    write goes through a temporary file of its own, so neither loses its rename."""
    from patchit.reports.render import write_report

    event = _dbt_event()
    report = _report(event, _evidence(event), _verdict())
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(40):
                write_report(report.model_copy(update={"events": n * 100 + i}), tmp_path)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{report.incident_id}.html",
                                                          f"{report.incident_id}.json",
                                                          f"{report.incident_id}.md"]  # fmt: skip
    final = RootCauseReport.model_validate_json(
        (tmp_path / f"{report.incident_id}.json").read_text()
    )
    assert final.events % 100 == 39  # whole, and some writer's last write (each ends at 39)
    assert (tmp_path / f"{report.incident_id}.html").read_text().rstrip().endswith("</html>")
