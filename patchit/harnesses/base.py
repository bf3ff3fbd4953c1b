"""The `Harness` plugin interface: re-run one failed unit the way its runtime does."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.screen.model import Screening as Screening  # re-exported: a harness answers it


class Workspace(BaseModel):
    """A worktree at the failing commit with the candidate applied, plus scratch space."""

    model_config = ConfigDict(extra="forbid")

    root: Path = Field(description="worktree root (the repo's root, patched)")
    scratch: Path = Field(description="writable scratch dir owned by this candidate")
    snapshot: Path | None = Field(
        default=None, description="dir holding the incident's database snapshot to copy from"
    )


class Verification(BaseModel):
    """The harness's answer. A failing pipeline is passed=False, not an exception."""

    model_config = ConfigDict(extra="forbid")

    passed: bool
    harness: str
    command: str = Field(description="what was run, as a human would type it")
    output: str = Field(default="", description="tail of the output, redacted")
    failures: list[str] = Field(default_factory=list, description="unit ids that still fail")
    duration_ms: int = 0
    isolation: str = "subprocess"
    fidelity: str = "runtime"
    limit_hit: str | None = Field(default=None, description="time | memory | network, if any")
    units: dict[str, str] = Field(
        default_factory=dict,
        description="each failed unit of the incident this run re-ran (the event's unit and its "
        "`related_units`) and how it ended: pass, or the runtime's word (error, fail, failed, "
        "upstream_failed, not run)",
    )
    set_aside: list[str] = Field(
        default_factory=list,
        description="units outside the incident that failed again in this run and were failing "
        "on this line before the candidate, which does not edit them: not held against it",
    )
    outputs: dict[str, str] = Field(
        default_factory=dict,
        description="where the run left what a data check compares: 'duckdb' (the run's "
        "database copy), 'target' (dbt's target dir), 'result' (the Airflow result JSON)",
    )


@runtime_checkable
class Harness(Protocol):
    """Re-runs one failed unit, with the other failed units of its incident (the event's
    `context["related_units"]`): a verification passes only when all of them pass, and says
    how each ended (`Verification.units`). Everything the loop calls on a harness is here:

    - `configure(config)`: the repo's settings (time limit, sandbox), before any verify;
    - `warm_up(event)`: start the runtime in the background while evidence is gathered (may do
      nothing); never raises: a runtime that cannot start is the next verify's answer;
    - `applies_to(event, repo)`: whether it can re-run this unit;
    - `screen(workspace, event, changed)`: a cheap look at the patched worktree before
      `verify` (`changed`: the repo-relative files the candidate edits). It rejects only what
      is certain to fail (a SQL binder error, a SyntaxError) and passes on whatever it cannot
      judge; it never raises. A harness with nothing cheap to check returns
      `Screening.nothing(why)`. Only survivors are verified: the screen never replaces verify;
    - `verify(workspace, event)`: a failing pipeline is `Verification(passed=False)`; raise
      `HarnessError` only when the harness could not run at all;
    - `release(area)`: the incident whose workspaces are under `area` is over: drop what was
      made for them outside the filesystem (a Postgres sandbox schema); the runtime stays warm;
    - `close()`: stop what it started (idempotent).
    """

    name: ClassVar[str]

    def configure(self, config: PatchitConfig) -> None: ...

    def warm_up(self, event: UniversalFailureEvent | None = None) -> None: ...

    def applies_to(self, event: UniversalFailureEvent, repo: Path) -> bool: ...

    def screen(
        self, workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening: ...

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification: ...

    def release(self, area: Path) -> None: ...

    def close(self) -> None: ...
