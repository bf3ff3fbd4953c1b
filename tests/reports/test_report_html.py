"""The HTML Root Cause Report: one self-contained page (nothing loaded, no script), every value
escaped and redacted, each section findable by id; `patchit report ID --format html` prints its
path (rendering it from the JSON for a report written before there was HTML); and in headless
Chromium a reader sees the status, the coloured diffs and every section."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.model import ConversionFinding
from patchit.memory import Memory
from patchit.reports.html import render_html
from patchit.reports.model import AttemptLine, LlmSummary, RootCauseReport
from patchit.reports.render import html_path, render_markdown, write_report
from tests.cli.helpers import patchit
from tests.reports.html_page import Page, chromium, png_pixels

TOKEN = "ghp_" + "Q7w3" * 9
ATTACK = "<script>alert(1)</script>"
SECTIONS = ("summary", "failure", "why", "breaking-change", "fix", "verification",
            "confidence", "data-check", "attempts", "recent-changes", "next-actions")  # fmt: skip
HUNKS = """\
diff --git a/models/orders.sql b/models/orders.sql
--- a/models/orders.sql
+++ b/models/orders.sql
@@ -1,2 +1,2 @@
 select order_id,
-    amount
+    amout
"""
FIX = HUNKS.replace("-    amount\n+    amout", "-    amout\n+    amount")
DATA_CHECK = """\
- fidelity: harness dbt, isolation copy, data check: 1 output same, 1 meant to differ
- baseline: `a1b2c3d4e5f6` (last good commit (memory)), 1 run(s)

| output | verdict | rows (baseline -> candidate) | differs in |
|---|---|---|---|
| orders_total | meant | 3 -> 3 | amount |
"""


def report(incident_id: str = "20261126-abcdef", status: str = "fixed") -> RootCauseReport:
    return RootCauseReport(
        incident_id=incident_id, status=status, classification="code_bug",
        signature="duckdb_column_not_found", reason="the column `amount` was renamed to `amout`",
        fingerprint="fp1", source="dbt", pipeline_id="shop", unit_id="model.shop.orders",
        unit_path="models/orders.sql", error_type="Binder Error",
        error_message=f'Referenced column "amout" not found {ATTACK} password=hunter2 {TOKEN}',
        repo_path="/srv/shop", commit="f" * 40, branch=f"patchit/{incident_id}",
        change_range="a1b2c3d4e5f6..ffffffffffff", unit_files=["models/orders.sql"],
        unit_hunks=HUNKS, changed_files=["models/orders.sql"], diff=FIX,
        verification="`dbt build --select orders` passed in 2.1 s (harness `dbt`, isolation "
        "`copy`, fidelity `full`, data check: 1 output same).",
        confidence=0.93, confidence_signals=["a deterministic strategy"], data_check=DATA_CHECK,
        failing_rows=[{"order_id": "7", "amount": "<b>bold</b>"}],
        attempts=[
            AttemptLine(number=1, strategy="dbt_fix_ref", tag="ref", outcome="failed",
                        reason="no such model", command="dbt build", output_tail="boom"),
            AttemptLine(number=2, strategy="duckdb_rename_column", tag="rename_column",
                        outcome="verified", reason="amout -> amount", duration_ms=2100),
        ],
        next_actions=["git -C /srv/shop show patchit/x", f"patchit inspect {incident_id}",
                      "re-run it: cd /srv/shop && dbt build --select orders"],
    )  # fmt: skip


def test_the_page_loads_nothing_and_runs_nothing() -> None:
    text = render_html(report())
    page = Page(text)
    assert "<script" not in text.lower()
    for tag, attrs in page.tags:
        assert tag not in ("link", "script", "img", "iframe", "object", "embed"), tag
        for name in ("src", "href", "srcset", "action", "data"):
            assert not re.match(r"\s*(https?:|//)", attrs.get(name, "")), (tag, attrs)
    assert not re.search(r"url\(|@import|@font-face", text)
    assert "default-src 'none'" in text  # a Content-Security-Policy forbids the rest


def test_every_value_is_escaped() -> None:
    text = render_html(report())
    assert ATTACK not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<b>bold</b>" not in text and "&lt;b&gt;bold&lt;/b&gt;" in text
    evil = report(status='fixed" onload="x').model_copy(
        update={"next_actions": [f"git show {ATTACK}"], "reason": f"`{ATTACK}` **{ATTACK}**",
                "data_check": f"- {ATTACK}\n\n| a |\n|---|\n| {ATTACK} |\n\n```\n{ATTACK}\n```\n"}
    )  # fmt: skip
    evil_text = render_html(evil)
    assert ATTACK not in evil_text and "<script" not in evil_text
    assert 'onload="x"' not in evil_text


def test_sections_diffs_and_timeline() -> None:
    page = Page(render_html(report()))
    assert set(SECTIONS) <= page.ids
    assert page.text("status-fixed") == ["fixed"]
    assert "-    amout" in page.text("del") and "+    amount" in page.text("add")
    assert "+    amout" in page.text("add")  # the breaking change's hunk
    assert all(line.startswith("@@") for line in page.text("hunk"))
    assert " select order_id," in page.text("ctx")
    assert page.text("verdict") == ["failed", "verified"]
    assert page.text("strategy") == ["dbt_fix_ref", "duckdb_rename_column"]
    assert "amout -> amount" in page.text("reason")


def test_the_least_and_the_most_a_report_holds() -> None:
    least = RootCauseReport(
        incident_id="20261126-000000", status="escalated", classification="unknown",
        signature="none", reason="it failed", fingerprint="fp", source="python",
        pipeline_id="jobs", unit_id="report", error_type="", error_message="",
    )  # fmt: skip
    page = Page(render_html(least))
    assert page.text("status-escalated") == ["escalated"]
    assert {"fix", "verification", "data-check", "confidence"}.isdisjoint(page.ids)
    assert "No patch was attempted." in render_html(least)

    most = report().model_copy(
        update={
            "events": 3, "last_seen_utc": datetime(2026, 11, 26, 9, 30, tzinfo=UTC),
            "latest_commit": "e" * 40, "related_units": ["model.shop.customers"],
            "pull_request": "https://github.example/acme/shop/pull/7", "outcome": "no_effect",
            "needs_review": True, "stop_reason": "the budget ran out",
            "tiers_run": ["deterministic: 2 candidates"], "recent_history": ["`abc` renamed"],
            "llm": LlmSummary(model="claude", rounds=1, calls=2, candidates=1, cost_usd=0.01),
            "evidence_notes": ["no log"],
            "conversion": ConversionFinding(value="n/a", target_type="INTEGER", column="amount",
                                            relation="seeds/raw_orders.csv", samples=["n/a"]),
        }
    )  # fmt: skip
    text = render_html(most)
    page = Page(text)
    assert {"recent-changes", "evidence-gaps"} <= page.ids
    for shown in (
        "2026-11-26 09:30 UTC",
        "eeeeeeeeeeee",
        "model.shop.customers",
        "no effect",
        "needs review",
        "the budget ran out",
        "claude",
        "seeds/raw_orders.csv",
        "https://github.example/acme/shop/pull/7",
    ):
        assert shown in text, shown
    assert not any("href" in attrs for _, attrs in page.tags)  # the PR's address is text


def test_the_html_is_written_and_redacted_like_the_markdown(tmp_path: Path) -> None:
    md, js = write_report(report(), tmp_path)
    html = html_path(md)
    assert html == tmp_path / "20261126-abcdef.html" and html.is_file()
    assert html_path(js) == html
    text, markdown = html.read_text(), md.read_text()
    for secret in ("hunter2", TOKEN, TOKEN[:10]):
        assert secret not in text and secret not in markdown, secret
    assert "password=***REDACTED***" in text and "password=***REDACTED***" in markdown
    assert not list(tmp_path.glob(".*.part"))
    # the same content as the Markdown: every table cell and heading of it has its counterpart
    for needed in (
        "The breaking change",
        "The fix",
        "Verification",
        "Confidence: 0.93",
        "Data check",
        "Attempts",
        "Next actions",
        "orders_total",
        "a1b2c3d4e5f6",
    ):
        assert needed in text and needed in render_markdown(report()), needed


def _write_incident(home: Path) -> str:
    with Memory.open(home) as memory:
        event = UniversalFailureEvent(
            source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.orders",
            repo_path="/srv/shop", commit="f" * 40, error_type="Binder Error",
            error_message='Referenced column "amout" not found',
        )  # fmt: skip
        incident = memory.create_incident(event, "fp1", "ck1")
        md, js = write_report(report(incident.id), home / "reports")
        memory.transition(incident.id, "fixed", branch=f"patchit/{incident.id}",
                          report_md=str(md), report_json=str(js))  # fmt: skip
    return incident.id


def test_cli_prints_the_html_path_and_renders_an_old_report(_patchit_home: Path) -> None:
    incident_id = _write_incident(_patchit_home)
    res = patchit("report", incident_id, "--format", "html")
    assert res.returncode == 0, res.stderr
    path = Path(res.stdout.strip())
    assert res.stdout.count("\n") == 1 and path.is_file() and path.suffix == ".html"
    assert path == _patchit_home / "reports" / f"{incident_id}.html"
    first = path.read_text()

    path.unlink()  # a report written before patchit wrote HTML
    res = patchit("report", incident_id, "--format", "html")
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()) == path and path.is_file()
    again = path.read_text()
    assert again == first and TOKEN not in again and 'id="next-actions"' in again

    for fmt, start in (("md", "# patchit incident"), ("json", "{")):  # unchanged
        res = patchit("report", incident_id, "--format", fmt)
        assert res.returncode == 0 and res.stdout.startswith(start), res.stderr


def test_cli_html_without_any_report(_patchit_home: Path) -> None:
    incident_id = _write_incident(_patchit_home)
    for suffix in (".html", ".json"):
        (_patchit_home / "reports" / f"{incident_id}{suffix}").unlink()
    res = patchit("report", incident_id, "--format", "html")
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"incident {incident_id}: no report yet" in lines[0]


@pytest.mark.slow
def test_a_reader_sees_the_report_in_chromium(tmp_path: Path) -> None:
    browser = chromium()
    md, _ = write_report(report(), tmp_path / "reports")
    url = html_path(md).as_uri()
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,3000",
              "--force-color-profile=srgb"]  # fmt: skip
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=60)
    assert dom.returncode == 0 and "</html>" in dom.stdout, dom.stderr[-2000:]
    page = Page(dom.stdout)
    assert not any(tag == "script" for tag, _ in page.tags)  # the planted one stayed text
    assert page.text("status-fixed") == ["fixed"]
    assert ATTACK in "".join(page.text("error"))
    assert "+    amount" in page.text("add") and "-    amout" in page.text("del")
    assert page.text("verdict") == ["failed", "verified"]
    for heading in (
        "What failed",
        "The breaking change",
        "The fix",
        "Verification",
        "Data check",
        "Attempts",
        "Next actions",
    ):
        assert heading in page.headings, (heading, page.headings)

    shot = tmp_path / "report.png"
    res = subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True, timeout=60)
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    width, height, colours = png_pixels(shot.read_bytes())
    assert (width, height) == (1200, 3000)
    # the diffs' line backgrounds and the status badge, as painted
    for name, rgb in (
        ("added line", (0xDA, 0xFB, 0xE1)),
        ("removed line", (0xFF, 0xEB, 0xE9)),
        ("hunk header", (0xDD, 0xF4, 0xFF)),
        ("fixed badge", (0x1A, 0x7F, 0x37)),
    ):
        assert rgb in colours, f"no {name} colour {rgb} in the screenshot"
