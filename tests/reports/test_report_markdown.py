"""The Markdown report is also a pull request's body: HTML quoted from errors, outputs, commit
subjects and data is escaped, and no quoted text can close its fence. Judged by a real
CommonMark renderer with raw HTML on (as code hosts render their allowed subset)."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from patchit.fidelity.model import DataCheck, OutputDiff
from patchit.reports.model import AttemptLine, RootCauseReport
from patchit.reports.render import render_markdown
from patchit.text.markdown import code, escape_outside_fences, fence

HOSTILE = '<img src=x onerror="alert(1)"><details open><script>steal()</script>'
BREAKOUT = f"line one\n```\n{HOSTILE}\n````\n~~~\nstill quoted"


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).render(markdown)


def _report(**fields: object) -> RootCauseReport:
    base: dict[str, object] = dict(
        incident_id="inc1", status="failed", classification="code_bug", signature="sig",
        reason=f"the model said {HOSTILE}", fingerprint="fp", source="dbt", pipeline_id="shop",
        unit_id="model.shop.orders", error_type=f"Error {HOSTILE}", error_message=BREAKOUT,
    )  # fmt: skip
    return RootCauseReport.model_validate({**base, **fields})


def _tags(html: str) -> set[str]:
    return set(re.findall(r"<(img|script|details|summary)\b", html))


def test_no_quoted_html_reaches_the_renderer() -> None:
    failed = AttemptLine(
        number=1, strategy="s", tag="t", outcome="failed", reason=HOSTILE,
        command=f"dbt build {HOSTILE}", output_tail=BREAKOUT,
    )  # fmt: skip
    report = _report(
        stop_reason=f"stopped: {HOSTILE}",
        recent_history=[f"abc123 {HOSTILE} (a commit subject)"],
        next_actions=[f"look at {HOSTILE}"],
        evidence_notes=[HOSTILE],
        changed_files=["models/a`b<img src=x>.sql"],
        failing_rows=[{"id": HOSTILE}],
        branch="patchit/x`<img src=y>`",
        attempts=[failed],
        diff="-a\n+```\n+" + HOSTILE,
    )
    html = _html(render_markdown(report))
    # the report's own <details><summary> per failed attempt, and nothing quoted
    assert _tags(html) == {"details", "summary"}
    assert html.count("<details>") == 1 and "<details open>" not in html
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;steal()&lt;/script&gt;" in html  # shown, not run


def test_a_fence_outlasts_every_run_of_backticks() -> None:
    html = _html(render_markdown(_report()))
    blocks = re.findall(r"<pre><code>(.*?)</code></pre>", html, re.DOTALL)
    assert blocks[0] == (  # the whole message, in one block, verbatim
        "line one\n```\n&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&lt;details open&gt;"
        "&lt;script&gt;steal()&lt;/script&gt;\n````\n~~~\nstill quoted\n"
    )
    assert fence("a ``` b\n`````").startswith("``````\n")
    assert fence("plain", "diff") == "```diff\nplain\n```"


def test_inline_code_cannot_be_closed_by_its_text() -> None:
    assert code("a`b") == "``a`b``"
    assert code("``x") == "` ``x `"
    html = _html(f"name {code('a`<img src=x>`b')} end")
    assert "<img" not in html and "<code>a`&lt;img src=x&gt;`b</code>" in html


def test_markdown_patchit_wrote_is_escaped_outside_its_fences_only() -> None:
    text = f"- note: {HOSTILE}\n\n```\n<kept verbatim>\n```\n- after {HOSTILE}"
    escaped = escape_outside_fences(text)
    assert "<kept verbatim>" in escaped and escaped.count("&lt;img") == 2
    check = DataCheck(
        status="differs",
        outputs=[OutputDiff(name="orders", verdict="unexpected", sample=f"```\n{HOSTILE}")],
        notes=[HOSTILE],
    )
    html = _html(render_markdown(_report(data_check=check.markdown())))
    assert "<img" not in html and "<script>" not in html
