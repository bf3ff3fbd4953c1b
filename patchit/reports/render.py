"""Render a `RootCauseReport` to Markdown, JSON and HTML under `$PATCHIT_HOME/reports/`.

A report is redacted once more as it is written (`patchit.text.redaction`): it quotes errors,
outputs and diffs, and a report is what gets pasted into tickets. The Markdown one is also a
pull request's body: what it quotes is escaped or fenced (`patchit.text.markdown`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from patchit.reports.html import render_html
from patchit.reports.model import RootCauseReport
from patchit.text.markdown import Safe, code, escape_html, escape_outside_fences, fence
from patchit.text.redaction import environment_secrets, scrub


def _escaped(value: object) -> object:
    """Every value the Markdown template writes is HTML-escaped unless a filter made it safe
    (`fence`, `code`, `markdown`): error messages and outputs come from the healed code."""
    if isinstance(value, str) and not isinstance(value, Safe):
        return escape_html(value)
    return value


_env = Environment(
    loader=PackageLoader("patchit.reports", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,  # Markdown, not HTML: escaped by `_escaped` and the filters below
    finalize=_escaped,
)
_env.filters.update(fence=fence, code=code, markdown=escape_outside_fences)


def render_markdown(report: RootCauseReport) -> str:
    return _env.get_template("report.md.j2").render(r=report)


def html_path(report_path: Path | str) -> Path:
    """The HTML report beside a report's .md (or .json): memory records only those two."""
    return Path(report_path).with_suffix(".html")


def _scrubbed(report: RootCauseReport) -> RootCauseReport:
    return RootCauseReport.model_validate(
        scrub(report.model_dump(mode="python"), environment_secrets())
    )


def _write_atomic(path: Path, text: str) -> None:
    # a name of its own: two workers may re-render one incident's report at once
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_report(report: RootCauseReport, reports_dir: Path) -> tuple[Path, Path]:
    """Write `<id>.md`, `<id>.json` and `<id>.html` atomically; return the first two paths (the
    HTML one is `html_path(md)`)."""
    report = _scrubbed(report)
    reports_dir.mkdir(parents=True, exist_ok=True)
    md = reports_dir / f"{report.incident_id}.md"
    js = reports_dir / f"{report.incident_id}.json"
    for path, text in (
        (md, render_markdown(report)),
        (js, report.model_dump_json(indent=2)),
        (html_path(md), render_html(report)),
    ):
        _write_atomic(path, text)
    return md, js


def write_html_from_json(report_json: Path) -> Path:
    """Write the HTML report beside a JSON report that has none (one written before patchit
    wrote HTML); return its path. Raises OSError or ValueError if the JSON cannot be read."""
    report = _scrubbed(RootCauseReport.model_validate_json(report_json.read_text("utf-8")))
    path = html_path(report_json)
    _write_atomic(path, render_html(report))
    return path
