"""Named points where the fault-injection run (`make fault`) may kill patchit, as a crash would.

`PATCHIT_FAULT_AT=<name>` makes the process SIGKILL itself when it reaches `checkpoint(name)`:
no `finally`, no cleanup, exactly like the OOM killer or a lost machine. Unset (always, outside
`patchit.bench.fault`), a checkpoint costs one environment lookup. The random-timer kills of
the same run need no checkpoint; these make the narrow windows (verified but not yet landed,
committed but not yet on a branch) certain to be hit.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "PATCHIT_FAULT_AT"
CHECKPOINTS = (
    "claimed",  # the incident's lease is taken
    "before-record",  # a candidate ran; its attempt is not recorded yet
    "verified",  # a verified attempt is recorded; nothing is landed
    "committed",  # the fix is committed in the landing worktree; no branch yet
    "branched",  # the branch exists; the attempt is not marked landed
    "finished",  # the report is written; the incident's status is not recorded yet
)
# the `patchit dbt` wrapper's, outside any heal
WRAPPER_CHECKPOINTS = (
    "spooled",  # dbt returned and its failures are spooled; nothing else is recorded yet
)


def checkpoint(name: str) -> None:
    """Die here (SIGKILL) when the fault run asked for `name`."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
