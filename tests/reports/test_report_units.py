"""The report lists every failed unit of the incident and its verdict (issue 28): in Markdown
and HTML, from the fix's run or, when nothing was fixed, from the last candidate's run."""

from __future__ import annotations

from patchit.reports.html import render_html
from patchit.reports.model import RootCauseReport
from patchit.reports.render import render_markdown
from tests.reports.html_page import Page

VERDICTS = {"model.shop.orders": "success", "model.shop.orders_by_day": "error <b>x</b>"}


def report(**extra: object) -> RootCauseReport:
    fields: dict[str, object] = dict(
        incident_id="20261128-abcdef", status="failed", classification="code_bug",
        signature="duckdb_column_not_found", reason="two models read order_date",
        fingerprint="fp", source="dbt", pipeline_id="shop", unit_id="model.shop.orders",
        error_type="Binder Error", error_message="boom",
        related_units=["model.shop.orders_by_day"], unit_verdicts=VERDICTS,
    )  # fmt: skip
    return RootCauseReport.model_validate({**fields, **extra})


def test_markdown_lists_each_unit_and_its_verdict() -> None:
    text = render_markdown(report())
    assert "## Units of the incident (the last candidate's run)" in text
    assert "| `model.shop.orders` | success |" in text
    assert "| `model.shop.orders_by_day` | error &lt;b&gt;x&lt;/b&gt; |" in text  # escaped
    fixed = render_markdown(report(verification="`dbt build` passed", status="fixed"))
    assert "## Units of the incident (the fix's run)" in fixed
    assert "Units of the incident" not in render_markdown(report(unit_verdicts={}))


def test_html_lists_each_unit_escaped() -> None:
    text = render_html(report())
    page = Page(text)
    assert "units" in page.ids
    assert "<b>x</b>" not in text and "error &lt;b&gt;x&lt;/b&gt;" in text
    assert "model.shop.orders_by_day" in text
