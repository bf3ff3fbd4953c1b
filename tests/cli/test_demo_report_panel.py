"""The demo shows the fix's report in a panel; patchit's console never wraps its own lines, so
the panel must wrap the report's long lines itself instead of cropping them mid-word (the
fidelity line was cut at "pid ns, no")."""

from __future__ import annotations

import io

from rich.console import Console

from patchit.cli.context import console as patchit_console
from patchit.cli.demo_cmd import show_report

FIDELITY = (
    "fidelity: harness dbt, isolation bubblewrap (user ns, no caps, pid ns, no network, env "
    "allowlist, host secrets hidden, 4096 MB, private /tmp, writes: its worktree and scratch "
    "(landlock per candidate)), data check: same as baseline e651a7d460e9"
)


def test_a_long_report_line_is_wrapped_in_the_panel_not_cut() -> None:
    out = io.StringIO()
    # patchit's console as it is, writing where the test reads, 80 columns as when piped
    console = Console(file=out, width=80, highlight=False, soft_wrap=patchit_console.soft_wrap)
    assert console.soft_wrap  # the reason the panel must wrap by itself
    show_report(console, f"# Fixed\n\n- {FIDELITY}\n", "report.md")
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    inside = " ".join(line.strip("│ ").strip() for line in lines[1:-1])
    assert " ".join(FIDELITY.split()) in " ".join(inside.split())
