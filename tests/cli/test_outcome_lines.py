"""The lines a heal ends with: the incident's status, its branch and where its reports are."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.cli.context import print_outcome


def test_the_html_report_is_named_beside_the_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md = tmp_path / "20261126-abcdef.md"
    md.write_text("# report\n")
    print_outcome("20261126-abcdef", "escalated", None, str(md), [])
    assert f"report: {md}\n" in capsys.readouterr().err  # no HTML written: none named
    md.with_suffix(".html").write_text("<html></html>")
    print_outcome("20261126-abcdef", "escalated", None, str(md), [])
    out = capsys.readouterr().err
    assert f"report: {md} (HTML: {md.with_suffix('.html')})" in out
