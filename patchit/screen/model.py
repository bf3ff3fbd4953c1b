"""`Screening`: what a cheap look at a candidate, before its harness run, concluded."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Screening(BaseModel):
    """A screen's answer. It rejects (`passed=False`) only when it is certain the run would
    fail: a SQL parser or binder error, a Python SyntaxError, a DAG file that does not import.
    Whatever it cannot judge passes on to the harness, which alone says that a fix works."""

    model_config = ConfigDict(extra="forbid")

    passed: bool = True
    check: str = Field(default="", description="what was checked, as a human would say it")
    screened: list[str] = Field(default_factory=list, description="files (or nodes) it judged")
    skipped: list[str] = Field(
        default_factory=list, description="'<file>: why' for each part it could not judge"
    )
    reason: str = Field(default="", description="why it was rejected: the error, in short")
    output: str = Field(default="", description="the error in full, for the report")
    duration_ms: int = 0

    @classmethod
    def nothing(cls, why: str, check: str = "") -> Screening:
        """A screen that judged nothing (and so passes): `why` says what kept it from judging."""
        return cls(check=check or "nothing screened", skipped=[why])

    def summary(self) -> str:
        """One line for the loop's output."""
        if not self.passed:
            return f"screened out ({self.check}): {self.reason}"
        judged = ", ".join(self.screened) or "nothing"
        skipped = f"; not judged: {'; '.join(_grouped(self.skipped))}" if self.skipped else ""
        return f"screen passed ({self.check}: {judged}){skipped}"


def _grouped(skipped: list[str], named: int = 2) -> list[str]:
    """'<file>: why' entries with one reason said once for all its files, `named` of them by
    name ('a.sql, b.sql and 25 more: calls to_dollars(), ...'), in first-seen order."""
    files: dict[str, list[str]] = {}
    for entry in skipped:
        part, sep, why = entry.partition(": ")
        key = why if sep else entry
        files.setdefault(key, []).append(part if sep else "")
    out = []
    for why, parts in files.items():
        if parts == [""]:
            out.append(why)
            continue
        more = f" and {len(parts) - named} more" if len(parts) > named + 1 else ""
        shown = parts if not more else parts[:named]
        out.append(f"{', '.join(shown)}{more}: {why}")
    return out
