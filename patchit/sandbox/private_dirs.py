"""Private dirs named after the process that made them, so a later run can tell whose they
are: `<prefix><owner>-<random>`, where `owner` is `liveness.run_owner()` (host, pid, start
time). The dbt harness keeps the failing run's parse (rendered vars, secrets too) in such
dirs and removes them when it closes; those of a process killed before that are removed by
the next run's recovery sweep (`patchit.loop.recovery`) or the next harness that makes one."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from patchit.state.liveness import owner_is_dead, run_owner

# (area under $PATCHIT_HOME, prefix): the parses an older patchit kept per lineage (swept
# only: none are made any more), and the dbt harness's copies of the failing run's parse
# (where the warm worker can read them)
KEPT_PARSES = ("cache", "dbt-partial-parse-")
FAILING_PARSES = ("sandboxes", ".dbt-failing-parse-")
# the warm Airflow parent's own home (out of /tmp, so its forks may have the private /tmp)
AIRFLOW_PARENTS = ("sandboxes", ".airflow-parent-")
# the parse a warm dbt worker's warm-up saves (a file) before its parent moves it into the
# cache: a parent killed in between left it behind (`make fault`: 1 of 100 kills)
WARM_UP_PARSES = ("sandboxes", "dbt-warm-up-")
ALL = (KEPT_PARSES, FAILING_PARSES, AIRFLOW_PARENTS, WARM_UP_PARSES)


def make_private_dir(home: Path, kind: tuple[str, str]) -> Path:
    """A new private dir of `kind` under `home`, after removing those of dead processes."""
    area, prefix = kind
    parent = home / area
    parent.mkdir(parents=True, exist_ok=True)
    remove_dead(home, kind)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{run_owner()}-", dir=parent))


def remove_dead(home: Path, kind: tuple[str, str]) -> int:
    """Remove the dirs (or files) of `kind` whose process is known to be gone; how many. One
    without a readable owner, or of a process that may be alive, is kept."""
    area, prefix = kind
    removed = 0
    for entry in sorted((home / area).glob(f"{prefix}*")):
        owner = entry.name[len(prefix) :].rpartition("-")[0]
        if not owner or not owner_is_dead(owner):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed += 1
    return removed
