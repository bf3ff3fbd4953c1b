"""`FakeHarness`: a harness that runs no runtime, for tests of the loop and of plugins.

It ships in the library (as httpx ships `MockTransport`) so that patchit's own loop tests,
and a third party's tests of a strategy, run in milliseconds without dbt or Airflow. A
`handler(workspace, event)` decides each verification; it sees the candidate's worktree,
patched, exactly as a real harness would:

    harness = FakeHarness.passing_when("dags/etl.py", 'row["amount"]')
    ctx = Context(..., harnesses=[harness])
    heal(event, ctx)
    assert 'row["amount"]' in harness.calls[-1].files["dags/etl.py"]

The handler answers a `Verification`, or a bool that is turned into one. It runs under the
harness's time limit like any runtime: one that does not return in time is a `time` limit.

A `screener(workspace, event, changed)` stands in for the harness's screen before verify: it
answers a `Screening`, a reason string (rejected), or None (passed). By default nothing is
screened. `FakeHarness.screening_out(path, text)` rejects a candidate whose `path` contains
`text` without a verify, as a binder would reject a column that does not exist:

    harness = FakeHarness.passing_when("models/x.sql", "amount")
    harness.screener = FakeHarness.screening_out("models/x.sql", "amout_cents")
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Screening, Verification, Workspace

Handler = Callable[[Workspace, UniversalFailureEvent], "Verification | bool"]
Screener = Callable[[Workspace, UniversalFailureEvent, list[str]], "Screening | str | None"]
FAKE_CHECK = "fake screen"


@dataclass
class FakeCall:
    """One verify: the event, and the text of the files the handler read or was told about."""

    event: UniversalFailureEvent
    root: Path
    result: Verification
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeScreen:
    """One screen: the files the candidate changed and what the screener said."""

    event: UniversalFailureEvent
    root: Path
    changed: list[str]
    result: Screening


def _never(_workspace: Workspace, _event: UniversalFailureEvent) -> bool:
    return False


class FakeHarness:
    """Runs `handler` in place of a runtime; records every call, configure, warm-up and close."""

    name: ClassVar[str] = "fake"

    def __init__(
        self,
        handler: Handler = _never,
        *,
        applies: bool = True,
        watch: tuple[str, ...] = (),
        timeout_s: float = 600,
        screener: Screener | None = None,
    ) -> None:
        self.handler = handler
        self.screener = screener
        self.applies = applies
        self.watch = watch  # repo-relative files whose text each call records
        self.timeout_s = timeout_s
        self.calls: list[FakeCall] = []
        self.screens: list[FakeScreen] = []
        self.config: PatchitConfig | None = None
        self.warm_ups = 0
        self.closed = 0

    @classmethod
    def passing_when(cls, path: str, text: str, *, timeout_s: float = 600) -> FakeHarness:
        """Passes when the worktree's `path` contains `text`; else fails with the file's end."""

        def handler(workspace: Workspace, event: UniversalFailureEvent) -> Verification:
            target = workspace.root / path
            body = target.read_text() if target.is_file() else ""
            passed = text in body
            output = "ok" if passed else f"{path}: {text!r} not found\n{body[-400:]}"
            return fake_verification(event, passed, output)

        return cls(handler, watch=(path,), timeout_s=timeout_s)

    @staticmethod
    def screening_out(path: str, text: str) -> Screener:
        """A screener that rejects when the worktree's `path` contains `text`."""

        def screener(
            workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
        ) -> str | None:
            target = workspace.root / path
            body = target.read_text() if target.is_file() else ""
            return f"{path}: {text!r} does not bind" if text in body else None

        return screener

    def configure(self, config: PatchitConfig) -> None:
        self.config = config
        self.timeout_s = config.loop.harness_timeout_s

    def warm_up(self, event: UniversalFailureEvent | None = None) -> None:
        self.warm_ups += 1

    def applies_to(self, event: UniversalFailureEvent, repo: Path) -> bool:
        return self.applies

    def screen(
        self, workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening:
        started = time.monotonic()
        if self.screener is None:
            result = Screening(check=f"{FAKE_CHECK} (no screener: nothing judged)")
        else:
            answer = self.screener(workspace, event, list(changed))
            if isinstance(answer, Screening):
                result = answer
            elif answer:
                result = Screening(
                    passed=False, check=FAKE_CHECK, screened=list(changed), reason=answer,
                    output=answer,
                )  # fmt: skip
            else:
                result = Screening(check=FAKE_CHECK, screened=list(changed))
        duration_ms = max(1, int((time.monotonic() - started) * 1000))
        result = result.model_copy(update={"duration_ms": result.duration_ms or duration_ms})
        self.screens.append(FakeScreen(event, workspace.root, list(changed), result))
        return result

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        started = time.monotonic()
        files = {rel: _read(workspace.root / rel) for rel in self.watch}
        answer: list[Verification | bool | BaseException] = []

        def run() -> None:
            try:
                answer.append(self.handler(workspace, event))
            except BaseException as exc:  # handed to the caller's thread below
                answer.append(exc)

        worker = threading.Thread(target=run, name="patchit-fake-harness", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if not answer:
            result = fake_verification(
                event, False, f"patchit: stopped after {self.timeout_s:g} s", limit_hit="time"
            )
        elif isinstance(answer[0], BaseException):
            raise answer[0]
        elif isinstance(answer[0], bool):
            result = fake_verification(event, answer[0], "passed" if answer[0] else "failed")
        else:
            result = answer[0]
        duration_ms = max(1, int((time.monotonic() - started) * 1000))
        result = result.model_copy(update={"duration_ms": result.duration_ms or duration_ms})
        self.calls.append(FakeCall(event, workspace.root, result, files))
        return result

    def release(self, area: Path) -> None:
        """Nothing outside the filesystem to release."""

    def close(self) -> None:
        self.closed += 1


def fake_verification(
    event: UniversalFailureEvent, passed: bool, output: str = "", limit_hit: str | None = None
) -> Verification:
    """The `Verification` a fake run answers: the unit (and the incident's related units) fail
    unless `passed`."""
    units = dict.fromkeys([event.unit_id, *map(str, event.context.get("related_units") or [])])
    return Verification(
        passed=passed,
        harness=FakeHarness.name,
        command=f"fake verify {event.unit_id}",
        output=output,
        failures=[] if passed else [event.unit_id],
        units={unit: "pass" if passed else "fail" for unit in units},
        isolation="none (fake harness, nothing run)",
        fidelity="fake",
        limit_hit=limit_hit,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
