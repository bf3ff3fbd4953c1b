"""patchit's lines outside a terminal (logs, pipes, CI) are never hard-wrapped at 80 columns:
a sentence cut mid-way breaks greps and reads badly in a CI page that wraps for itself."""

from __future__ import annotations

import subprocess
import sys


def test_a_long_line_to_a_pipe_stays_one_line() -> None:
    words = " ".join(f"word{n}" for n in range(40))
    code = (
        "from patchit.cli.context import console, say\n"
        f"console.print('  {words}')\nsay('{words}')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin", "TERM": "dumb"})  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [f"  {words}", f"patchit: {words}"]
