"""Render a `RootCauseReport` to Markdown and JSON under `$PATCHIT_HOME/reports/`.

A report is redacted once more as it is written (`patchit.redaction`): it quotes errors,
outputs and diffs, and a report is what gets pasted into tickets.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from patchit.redaction import environment_secrets, scrub
from patchit.reports.model import RootCauseReport

_env = Environment(
    loader=PackageLoader("patchit.reports", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,  # Markdown, not HTML
)


def render_markdown(report: RootCauseReport) -> str:
    return _env.get_template("report.md.j2").render(r=report)


def write_report(report: RootCauseReport, reports_dir: Path) -> tuple[Path, Path]:
    """Write `<id>.md` and `<id>.json` atomically; return their paths."""
    report = RootCauseReport.model_validate(
        scrub(report.model_dump(mode="python"), environment_secrets())
    )
    reports_dir.mkdir(parents=True, exist_ok=True)
    md = reports_dir / f"{report.incident_id}.md"
    js = reports_dir / f"{report.incident_id}.json"
    for path, text in ((md, render_markdown(report)), (js, report.model_dump_json(indent=2))):
        # a name of its own: two workers may re-render one incident's report at once
        fd, name = tempfile.mkstemp(dir=reports_dir, prefix=f".{path.name}.", suffix=".part")
        tmp = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return md, js
