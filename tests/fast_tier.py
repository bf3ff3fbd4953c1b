"""What makes a test slow, as the fast tier's guard sees it (stdlib only: child processes load
this file too).

A test is slow when it starts dbt, Airflow, Postgres, docker or Chromium, in a child process, a
child's child (the `patchit` CLI running dbt), or in-process. tests/conftest.py checks the test's
own process; `watch_this_process()` runs in every Python child of a fast-tier test (through a
`sitecustomize` the conftest puts on PYTHONPATH) and appends what the child started, and
whether it had imported dbt or Airflow when it exited, to the file named by
PATCHIT_FAST_TIER_LOG, which the conftest reads after each test.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

LOG_ENV = "PATCHIT_FAST_TIER_LOG"
# chromium: the HTML report's browser test (about 2 s a page)
SLOW_PROGRAMS = frozenset({"dbt", "airflow", "postgres", "initdb", "pg_ctl", "docker", "chromium",
                           "chromium-browser", "fakesnow"})  # fmt: skip
SLOW_PACKAGES = ("dbt", "airflow")
# dbt's namespace packages hold no dbt code: patchit locates dbt's bundled macros with
# `find_spec("dbt.include")`, which imports `dbt` (a bare `extend_path`) and nothing else.
NAMESPACE_ONLY = frozenset({"dbt", "dbt.include"})


def slow_program(args: Any) -> str | None:
    """The slow program `args` (Popen's first argument) would start, or None.

    Looks through interpreters (`python -m airflow`, `python -m patchit.harnesses.dbt.worker`,
    `python .venv/bin/dbt`) and launchers (`bwrap ... -- dbt`): whatever the program is
    spelled as, what runs is what counts."""
    if isinstance(args, str):
        argv = args.split()
    elif isinstance(args, bytes | os.PathLike):
        argv = [os.fsdecode(args)]
    else:
        argv = [os.fsdecode(a) for a in args]
    for i, arg in enumerate(argv):
        if os.path.basename(arg) in SLOW_PROGRAMS and (i == 0 or os.path.isfile(arg)):
            return arg
        if arg == "-m" and i + 1 < len(argv):
            module = argv[i + 1]
            # dbt or Airflow itself, or patchit's own runners of them: a module of a runtime's
            # package (`patchit.harnesses.dbt.worker`, `patchit.harnesses.airflow.fork`) or
            # named after one (`patchit.intake.dbt_child`)
            parts = module.split(".")
            if parts[0] in SLOW_PACKAGES or any(p.startswith(SLOW_PACKAGES) for p in parts[1:]):
                return f"-m {module}"
    return None


def is_slow_module(name: str) -> bool:
    return name.split(".")[0] in SLOW_PACKAGES and name not in NAMESPACE_ONLY


def slow_modules() -> set[str]:
    return {name for name in sys.modules if is_slow_module(name)}


def guard_popen(on_slow: Callable[[str], None]) -> Callable[..., None]:
    """A replacement for `subprocess.Popen.__init__` calling `on_slow(program)` first."""
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        if program := slow_program(args):
            on_slow(program)
        original(self, args, *rest, **kw)

    return guarded


def watch_this_process() -> None:
    """In a child of a fast-tier test: log slow programs it starts and slow modules it imports."""
    log = os.environ.get(LOG_ENV)
    if not log:
        return

    def record(what: str) -> None:
        where = " ".join(sys.argv)[:120] or sys.executable
        with open(log, "a") as handle:
            handle.write(f"{what} (in a child: {where})\n")

    def report_imports() -> None:
        # at exit, not in a meta path finder: `find_spec("dbt.cli")` asks the finders about
        # dbt.cli without importing it, and patchit does ask
        if loaded := sorted(slow_modules()):
            record(f"imported {loaded[0]!r}")

    atexit.register(report_imports)
    subprocess.Popen.__init__ = guard_popen(lambda p: record(f"started {p!r}"))  # type: ignore[method-assign]
