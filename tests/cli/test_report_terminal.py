"""`patchit report ID` renders the Markdown for a person at a terminal and prints the file as
it is to a pipe (scripts, `> report.md`)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from patchit.events.model import UniversalFailureEvent
from patchit.memory import Memory
from tests.cli.helpers import patchit

REPORT = "# Root Cause Report\n\n## What failed\n\n**model** `orders` failed.\n"


def test_markdown_is_rendered_at_a_terminal_and_raw_in_a_pipe(_patchit_home: Path) -> None:
    _patchit_home.mkdir(parents=True, exist_ok=True)
    path = _patchit_home / "r.md"
    path.write_text(REPORT, encoding="utf-8")
    with Memory.open(_patchit_home) as memory:
        event = UniversalFailureEvent.model_validate(
            {"source": "dbt", "pipeline_id": "shop", "unit_id": "model.shop.orders",
             "error_type": "E", "error_message": "x", "repo_path": "/srv/shop"}
        )  # fmt: skip
        incident = memory.create_incident(event, "fp", "ck")
        memory.update_incident(incident.id, report_md=str(path))
    piped = patchit("report", incident.id)
    assert piped.returncode == 0 and piped.stdout == REPORT
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "patchit", "report", incident.id],
                            stdin=follower, stdout=follower, stderr=subprocess.PIPE)  # fmt: skip
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    os.close(leader)
    text = shown.decode("utf-8", "replace")
    assert "Root Cause Report" in text and "What failed" in text
    assert "## " not in text and "**model**" not in text, text
