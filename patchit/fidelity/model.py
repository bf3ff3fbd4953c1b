"""`DataCheck`: what the data-aware verification of one candidate found, for reports and memory.

A candidate that turns the run green is compared with a baseline (the last good commit's run
on a copy of the same snapshot). Every output (a dbt relation, an Airflow XCom or written
file) gets one `OutputDiff`; the check as a whole says whether anything differs where the
breaking change did not mean it to (`needs_review`), which keeps the candidate off
`patchit/<id>` and out of any pull request.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from patchit.text.markdown import code, fence

CheckStatus = Literal["same", "differs", "no_baseline", "not_run", "error"]
# same: equal (unstable columns excluded); meant: differs only where the breaking diff meant;
# propagated: downstream of meant differences with unchanged code; unstable: differs between
# two baseline runs; unexpected: differs anywhere else (needs review)
OutputVerdict = Literal["same", "meant", "propagated", "unstable", "unexpected"]


class OutputDiff(BaseModel):
    """One output compared: a relation (dbt) or an XCom / written file (Airflow)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["relation", "xcom", "file"] = "relation"
    name: str = Field(description="schema.relation, task.key, or root/<path> / scratch/<path>")
    unique_id: str | None = None
    missing_in: Literal["baseline", "candidate"] | None = None
    renamed_from: str | None = Field(
        default=None, description="the baseline relation of a model the change renamed"
    )
    schema_changes: list[str] = Field(
        default_factory=list, description="'+col TYPE' (candidate only), '-col TYPE', '~col A -> B'"
    )
    rows_baseline: int | None = None
    rows_candidate: int | None = None
    differing: list[str] = Field(
        default_factory=list, description="columns (or 'value'/'content') that differ"
    )
    unstable: list[str] = Field(
        default_factory=list, description="of those, the ones two baseline runs disagree on"
    )
    nondeterministic: bool = Field(
        default=False,
        description="differs though both runs built it from the same code and the same inputs",
    )
    renamed: list[str] = Field(
        default_factory=list,
        description="'old -> new': a column the breaking change renamed, same type and values",
    )
    meant: list[str] = Field(default_factory=list, description="differing and meant to differ")
    unexpected: list[str] = Field(default_factory=list, description="differing, not meant")
    verdict: OutputVerdict = "same"
    sample: str = Field(default="", description="bounded sample of differing rows/values")


class DataCheck(BaseModel):
    """The data check of one candidate: status, baseline, per-output results, verdict."""

    model_config = ConfigDict(extra="forbid")

    status: CheckStatus
    kind: Literal["dbt", "airflow", "none"] = "none"
    harness: str = ""
    isolation: str = ""
    baseline_commit: str | None = None
    baseline_source: str = Field(
        default="", description="'last good commit (memory)' or 'parent of the failing commit'"
    )
    baseline_runs: int = 0
    outputs: list[OutputDiff] = Field(default_factory=list)
    meant_to_differ: dict[str, list[str]] = Field(
        default_factory=dict, description="output -> columns the breaking diff meant to change"
    )
    unstable_excluded: dict[str, list[str]] = Field(default_factory=dict)
    needs_review: bool = False
    summary: str = ""
    notes: list[str] = Field(default_factory=list)

    @property
    def blocks_sync(self) -> bool:
        """A candidate whose outputs differ where nothing meant them to is not 'verified'."""
        return self.needs_review

    def new_outputs(self) -> list[str]:
        """What the candidate built that the baseline has nothing to compare with: outputs
        missing in the baseline, and new columns (`schema.relation.column`) other than a
        renamed column, which was compared with its old name."""
        found: list[str] = []
        for out in self.outputs:
            if out.missing_in == "baseline":
                found.append(out.name)
                continue
            renamed = {pair.split(" -> ", 1)[-1] for pair in out.renamed}
            found += [
                f"{out.name}.{column}"
                for change in out.schema_changes
                if change.startswith("+") and (column := change[1:].split(" ", 1)[0]) not in renamed
            ]
        return found

    def unjudged(self, most: int = 6) -> str:
        """'the data check could not judge: <outputs> are new', or '' when it judged all."""
        new = self.new_outputs()
        if not new:
            return ""
        more = f" and {len(new) - most} more" if len(new) > most else ""
        verb = "is" if len(new) == 1 else "are"
        return f"the data check could not judge: {', '.join(new[:most])}{more} {verb} new"

    def fidelity(self) -> str:
        """One line every verification report carries: harness, isolation, data check."""
        harness = self.harness or "?"
        isolation = self.isolation or "?"
        return f"harness {harness}, isolation {isolation}, data check: {self.summary}"

    def markdown(self) -> str:
        """The check's body in Markdown (the report supplies the section heading)."""
        lines = [f"- fidelity: {self.fidelity()}"]
        if self.baseline_commit:
            lines.append(
                f"- baseline: `{self.baseline_commit[:12]}` ({self.baseline_source}), "
                f"{self.baseline_runs} run(s)"
            )
        if self.needs_review:
            lines.append("- **needs review**: outputs differ where the breaking change did not")
        for name, cols in sorted(self.meant_to_differ.items()):
            lines.append(f"- meant to differ: {name}: {', '.join(cols) or '(none)'}")
        for name, cols in sorted(self.unstable_excluded.items()):
            lines.append(f"- unstable, excluded: {name}: {', '.join(cols)}")
        lines.extend(f"- note: {note}" for note in self.notes)
        changed = [o for o in self.outputs if o.verdict != "same"]
        if changed:
            lines += ["", "| output | verdict | rows (baseline -> candidate) | differs in |",
                      "|---|---|---|---|"]  # fmt: skip
            for out in changed:
                rows = (
                    f"{out.rows_baseline} -> {out.rows_candidate}"
                    if out.rows_baseline is not None or out.rows_candidate is not None
                    else ""
                )
                differs = ", ".join(out.differing + out.schema_changes)
                if out.renamed:
                    differs += f" (renamed, same values: {', '.join(out.renamed)})"
                if out.renamed_from:
                    differs = f"(renamed from {out.renamed_from}) {differs}".rstrip()
                if out.missing_in:
                    differs = f"missing in {out.missing_in}"
                lines.append(f"| {out.name} | {out.verdict} | {rows} | {differs} |")
            for out in changed:
                if out.sample and out.verdict == "unexpected":
                    lines += ["", f"Sample of differing rows in {code(out.name)}:", "",
                              fence(out.sample)]  # fmt: skip
        return "\n".join(lines) + "\n"
