"""A dbt worker started before the heal: as soon as the user's dbt run reports its first
failed node, while dbt still runs the rest of the build.

Importing dbt and warming it up takes seconds (most of the wait before the first candidate's
verification); the `patchit dbt` wrapper starts that work at the first error instead of after
dbt's exit (`prewarm`, from the thread that runs the heal: a bwrap sandbox dies with the
thread that spawned it). The dbt harness adopts the worker when it needs one and its sandbox
settings are the same; otherwise, and at exit, the worker is stopped.
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path

from patchit.config import SandboxConfig
from patchit.harnesses.dbt.worker_handle import WarmDbtWorker
from patchit.sandbox.isolation import make_sandbox, patchit_areas

_lock = threading.Lock()
_held: tuple[WarmDbtWorker, SandboxConfig] | None = None


def prewarm(config: SandboxConfig) -> int:
    """Spawn a dbt worker in the sandbox `config` asks for, without waiting; its pid. Once per
    process: a second call returns the first worker's pid."""
    global _held
    with _lock:
        if _held is None:
            sandbox = make_sandbox(config, patchit_areas(), warm=True)
            _held = (WarmDbtWorker.spawn(sandbox), config.model_copy())
            atexit.register(discard)
        return _held[0].pid


def adopt(config: SandboxConfig, need: tuple[Path, ...]) -> WarmDbtWorker | None:
    """The prewarmed worker, if any, when it runs with `config`'s sandbox settings and may
    write `need`; else None (a worker that does not fit is stopped)."""
    global _held
    with _lock:
        held, _held = _held, None
    if held is None:
        return None
    worker, started_with = held
    if started_with == config and worker.alive() and worker.sandbox.covers(*need):
        return worker
    worker.stop()
    return None


def discard() -> None:
    """Stop a prewarmed worker nothing adopted (no candidate reached verify)."""
    global _held
    with _lock:
        held, _held = _held, None
    if held is not None:
        held[0].stop()
