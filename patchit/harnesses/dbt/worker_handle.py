"""The parent's side of the warm dbt worker (`worker`, the process's side): start one in a
sandbox, send it requests from several threads at once, read their replies, stop it. Kept
apart from `worker` so that the worker's process imports none of it (patchit's settings,
events and sandbox code cost a fresh process a quarter of a second)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from patchit.harnesses.dbt import tuning_schemas
from patchit.harnesses.dbt.protocol import WARM_UP_PARSE, WARM_UP_PARSE_ENV, WARM_UP_SAVE_ENV
from patchit.harnesses.warm import WarmProcess
from patchit.sandbox.isolation import (
    PRIVATE_TMP,
    Sandbox,
    allowed_env,
    patchit_areas,
    shared_cache,
)
from patchit.sandbox.private_dirs import WARM_UP_PARSES
from patchit.state.liveness import run_owner

STARTUP_TIMEOUT_S = 120.0


def read_run_results(path: Path) -> list[dict[str, Any]]:
    """run_results.json rows in the worker's reply shape (empty when dbt wrote none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [
        {
            "unique_id": row.get("unique_id"),
            "status": row.get("status"),
            "message": row.get("message"),
            "resource_type": str(row.get("unique_id", "")).split(".")[0],
        }
        for row in data.get("results", [])
    ]


class WarmDbtWorker(WarmProcess):
    """The parent's handle on one worker process: start, send a request, stop."""

    label = "dbt worker"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mux = threading.Condition()  # request ids, replies read, who reads
        self._next_id = 0
        self._replies: dict[Any, dict[str, Any]] = {}
        self._reading = False
        self._ended = False  # its replies' stream ended (died or killed)
        # (where its warm-up leaves a file, where the next worker's warm-up starts from): its
        # parse, and the JSON schemas it made (`tuning_schemas`)
        self.warm_up_files: list[tuple[Path, Path]] = []

    @classmethod
    def start(cls, sandbox: Sandbox, startup_timeout_s: float = STARTUP_TIMEOUT_S) -> WarmDbtWorker:
        """Spawn a worker in `sandbox` and wait until dbt is imported; HarnessError if it
        cannot start."""
        worker = cls.spawn(sandbox)
        worker.wait_ready(startup_timeout_s)
        return worker

    @classmethod
    def spawn(cls, sandbox: Sandbox) -> WarmDbtWorker:
        """Spawn a worker without waiting for it (`wait_ready` later, from any thread).

        bwrap's --die-with-parent ties the sandbox to the *thread* that spawned it, so a
        worker that must outlive a helper thread is spawned by the caller's thread."""
        # Only the allowlisted environment: patchit's own DBT_* settings and everything else
        # of its environment stay out; each request brings what its run needs.
        env = allowed_env(os.environ) | {"HOME": str(PRIVATE_TMP)}
        cached = shared_cache() / WARM_UP_PARSE
        schemas = shared_cache() / tuning_schemas.SCHEMAS_FILE
        # named after this process: one left by a parent killed before it moved it is swept
        name = f"{WARM_UP_PARSES[1]}{run_owner()}-{uuid.uuid4().hex[:8]}"
        save = patchit_areas()[1] / f"{name}.msgpack"
        save_schemas = patchit_areas()[1] / f"{name}.schemas.json"
        env |= {WARM_UP_PARSE_ENV: str(cached), WARM_UP_SAVE_ENV: str(save)}
        env |= {
            tuning_schemas.SCHEMAS_ENV: str(schemas),
            tuning_schemas.SCHEMAS_SAVE_ENV: str(save_schemas),
        }
        with contextlib.suppress(OSError):
            save.parent.mkdir(parents=True, exist_ok=True)
        worker = cls([sys.executable, "-m", "patchit.harnesses.dbt.worker"], sandbox, env)
        worker.warm_up_files = [(save, cached), (save_schemas, schemas)]
        return worker

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """As WarmProcess's; the parse and the schemas the worker's warm-up left become the
        next worker's start (patchit's cache, read-only inside every sandbox)."""
        ready = super().wait_ready(timeout_s)
        files, self.warm_up_files = self.warm_up_files, []
        for save, cached in files:
            try:
                if save.is_file():
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(save, cached)
            except OSError:
                save.unlink(missing_ok=True)
        return ready

    def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send one request and wait for its reply; None (worker killed) on timeout.

        Safe from several threads at once: each request carries an id, one waiting thread
        at a time reads the worker's replies and hands each to the thread it answers."""
        with self._mux:
            self._next_id += 1
            rid = self._next_id
            sent = self.send({**payload, "id": rid})
        if not sent:
            return self._died()
        deadline = time.monotonic() + timeout_s
        with self._mux:
            while rid not in self._replies:
                remaining = deadline - time.monotonic()
                if self._ended or remaining <= 0:
                    break
                if self._reading:  # another thread reads; it wakes us for each reply
                    self._mux.wait(remaining)
                    continue
                self._reading = True
                self._mux.release()
                try:
                    line = self.read_line(remaining)
                finally:
                    self._mux.acquire()
                    self._reading = False
                    self._mux.notify_all()
                if line is not None:
                    self._replies[line.get("id")] = line
                elif not self.alive() or time.monotonic() < deadline:
                    self._ended = True  # end of stream: the worker died
            reply = self._replies.pop(rid, None)
            if reply is not None:
                return reply
            ended = self._ended
        if ended:
            return self._died()
        # timed out: kill it (a run beside it gets "died"), and stop it once nobody reads
        self.kill()
        with self._mux:
            while self._reading:
                self._mux.wait(1.0)
            self._ended = True
            self._mux.notify_all()
        self.stop()
        return None

    def _died(self) -> dict[str, Any]:
        """A worker that died mid-request failed that request; the next one gets a new worker."""
        self._proc.wait()
        message = f"dbt worker died (exit code {self.returncode()}): {self.stderr_tail()}"
        return {"success": False, "exception": message, "results": [], "worker_died": True}
