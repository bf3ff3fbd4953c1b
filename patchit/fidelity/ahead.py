"""The incident's baseline built beside the first candidate's verification.

The baseline (see `baseline`) does not depend on any candidate: only on the incident's
snapshot and the last good commit. So when the first candidate is about to be verified, and
its harness can run two verifications at once (`concurrent_verify`: the dbt harness, whose
warm worker runs each request in its own fork), the baseline's first run starts in a thread
beside it, from the same snapshot. The data check then finds it built (it waits for the
thread first), and costs only the comparison. A harness without `concurrent_verify` builds
the baseline after the candidate, as before; so does the check when no baseline was built
here (an error, or no commit that builds green): it tries again, and says why it could not.

The baseline it builds is the one `check_candidate` would build: same runner, same state
file, same commit choice. Only when it is built changes, never what is compared.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from patchit.errors import PatchitError
from patchit.events.model import UniversalFailureEvent
from patchit.fidelity.baseline import BaselineRunner
from patchit.harnesses.base import Harness


class BaselineAhead:
    """At most one baseline build per incident, in a thread; `wait()` before reading it."""

    def __init__(
        self,
        event: UniversalFailureEvent,
        repo: Path,
        harness: Harness,
        snapshot: Path | None,
        work: Path,
        remembered: str | None,
    ) -> None:
        self.runner = BaselineRunner(event, repo, harness, snapshot, work)
        self.remembered = remembered
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._go = threading.Event()  # set by start(): the build may run
        self._cancelled = False  # set by wait() when start() never came: only the tree goes
        self.error = ""  # why a build started here raised (the check builds it again)

    @staticmethod
    def supported(harness: Harness) -> bool:
        return bool(getattr(harness, "concurrent_verify", False))

    @property
    def started(self) -> bool:
        return self._thread is not None

    def prepare(self) -> None:
        """Start the thread now, with the baseline's worktree made at once and its build held
        until start(): a candidate's worktree is being made meanwhile, and a candidate that
        policy or memory then refuses costs only the baseline's worktree."""
        self._spawn()

    def start(self) -> bool:
        """Let the build run (the thread started unless it was); False when the harness
        cannot run it beside a verification."""
        if not self._spawn():
            return False
        self._go.set()
        return True

    def _spawn(self) -> bool:
        if not self.supported(self.runner.harness):
            return False
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._build, name="patchit-baseline", daemon=True
                )
                self._thread.start()
        return True

    def _build(self) -> None:
        # an error here is not the build's: the build makes the tree again and says why not
        with contextlib.suppress(Exception):
            self.runner.prepare_tree(self.remembered)
        self._go.wait()
        try:
            if not self._cancelled:
                self._first()
        finally:  # a prepared tree no run used (cancelled, or the build raised first)
            with contextlib.suppress(Exception):
                self.runner.discard_tree()

    def _first(self) -> None:
        try:
            baseline, why = self.runner.first(self.remembered)
        except PatchitError as exc:
            self.error = str(exc)
        except Exception as exc:  # a thread must not die silently: the check runs it again
            self.error = repr(exc)
        else:
            if baseline is None:
                # Not kept: the check tries again after the candidate passed, as before (the
                # harness failing now, e.g. its worker not starting, must not leave the
                # incident without a baseline for good).
                self.error = why
                self.runner.state_path.unlink(missing_ok=True)

    def wait(self) -> None:
        """Until a started build is done (at once when none was started). A thread that was
        only prepared, never started, removes its worktree and ends."""
        with self._lock:
            thread = self._thread
            if thread is not None and not self._go.is_set():
                self._cancelled = True
                self._go.set()
        if thread is not None:
            thread.join()
