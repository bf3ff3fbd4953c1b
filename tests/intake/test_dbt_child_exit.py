"""The dbt child ends as soon as dbt is done: atexit handlers and streams yes, the teardown of
every module no (that half second stood between dbt's last line and the wrapper's heal)."""

from __future__ import annotations

import subprocess
import sys

_CHILD = """
import atexit, sys
from patchit.intake.dbt_child import exit_now

class Module:
    def __del__(self):
        print("torn down", flush=True)

kept = Module()  # a module global: collected only by the interpreter's teardown
atexit.register(lambda: print("atexit ran"))
print("buffered", end="")
exit_now(3)
"""


def test_exit_now_runs_atexit_and_flushes_but_skips_the_teardown() -> None:
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True)
    assert proc.returncode == 3
    assert "buffered" in proc.stdout and "atexit ran" in proc.stdout
    assert "torn down" not in proc.stdout
