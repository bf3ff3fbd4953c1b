"""Long steps: a live elapsed-time status in a terminal, one plain line elsewhere."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from patchit.cli import context as cli_context
from patchit.loop.context import Context, say_step


def test_a_terminal_sees_the_elapsed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(cli_context, "console", Console(file=out, force_terminal=True, width=100))
    with cli_context.step("  verifying with the dbt harness"):
        time.sleep(1.3)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())  # what a reader sees
    assert "verifying with the dbt harness (0 s)" in text  # the live status as it starts...
    assert "verifying with the dbt harness (1 s)" in text  # ...updated while it runs
    assert re.search(r"patchit:   verifying with the dbt harness \(1\.\d s\)\n$", text)


def test_a_log_gets_one_plain_line(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(cli_context, "console", Console(file=out, force_terminal=False))
    with cli_context.step("  data check: comparing outputs with the baseline"):
        pass
    assert out.getvalue() == "patchit:   data check: comparing outputs with the baseline\n"


def test_the_library_default_says_the_line() -> None:
    said: list[str] = []
    with say_step(said.append)("verifying"):
        said.append("inside")
    assert said == ["verifying", "inside"]
    ctx = Context.__new__(Context)
    ctx.say, ctx.step = said.append, None
    with ctx.long_step("data check"):
        pass
    assert said[-1] == "data check"
