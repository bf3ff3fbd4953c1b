"""The one summary `patchit ci` writes per pull request: the comment it keeps up to date, the
job's step summary and the artifact file, all the same Markdown.

A reader scans it in a pull request: first the outcome of the build in one line, then one row
per incident (what failed, what patchit did about it), then each incident's Root Cause Report
folded away (the verification, the data check, or why it stopped), and the fix's diff against
the pull request's head, so a fork's author can apply it by hand.

The headline names what ran in the job (`Runtime`): `patchit ci` runs dbt, `patchit airflow
check` imports DAG files; a DAG check's summary that said "dbt failed" would send its reader to
the wrong tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patchit.delivery.forge import MAX_BODY_CHARS
from patchit.delivery.pr_review import SUMMARY_MARKER
from patchit.memory.records import Incident
from patchit.text.redaction import redact

REPORT_CHARS = 20_000  # per incident: a few incidents fit one comment


@dataclass(frozen=True)
class Runtime:
    """What the job ran, as the summary and the commit status word it."""

    name: str  # starts the headline and the status: "dbt", "The DAG check"
    failing: str  # what still fails until a fix is applied: "The build"
    passed: str  # after "passed on <sha>:"


DBT = Runtime("dbt", "The build", "nothing to heal")
DAG_CHECK = Runtime("The DAG check", "The check", "every DAG file checked imports")


@dataclass
class IncidentNote:
    """What became of one incident in this pull request."""

    incident: Incident
    delivered: str = ""  # "suggested in review ...", "pull request #12 into feature/x", ...
    diff: str = ""  # the fix against the head commit
    notes: list[str] = field(default_factory=list)


def render_summary(
    notes: list[IncidentNote],
    exit_code: int,
    head_sha: str,
    read_only: str,
    token: str,
    runtime: Runtime = DBT,
) -> str:
    """The summary's Markdown, marker first, the token masked wherever it might appear;
    `exit_code` is the job's (what `runtime` exited with)."""
    if exit_code == 0:
        headline = f"{runtime.name} passed on `{head_sha[:12]}`: {runtime.passed}."
    else:
        fixed = sum(1 for n in notes if n.incident.status == "fixed")
        headline = (f"{runtime.name} failed (exit {exit_code}) on `{head_sha[:12]}`: "
                    f"{len(notes)} incident(s), {fixed} with a verified fix. {runtime.failing} "
                    "still fails until a fix is applied.")  # fmt: skip
    parts = [SUMMARY_MARKER, "## patchit", "", headline, ""]
    if read_only:
        parts += [f"_Nothing was pushed or posted: {read_only}._", ""]
    if notes:
        parts += ["| incident | status | what patchit did |", "|---|---|---|"]
        for n in notes:
            done = _cell(n.delivered or n.incident.summary)
            parts.append(f"| `{n.incident.id}` | {_status(n.incident)} | {done} |")
        parts.append("")
    for note in notes:
        parts += _section(note)
    body = "\n".join(parts).rstrip() + "\n"
    body = redact(body, [token], max_chars=len(body) + 1) if token else body
    if len(body) > MAX_BODY_CHARS:
        body = body[:MAX_BODY_CHARS] + "\n\n_(summary cut: the job's artifact holds all of it)_\n"
    return body


def _section(note: IncidentNote) -> list[str]:
    incident = note.incident
    out = [f"### `{incident.id}`: {_status(incident)}", ""]
    if incident.summary:
        out += [incident.summary, ""]
    out += [f"- {line}" for line in note.notes]
    if note.notes:
        out.append("")
    if note.diff:
        out += ["<details><summary>the fix, against the head commit</summary>", "",
                "```diff", note.diff.rstrip(), "```", "", "</details>", ""]  # fmt: skip
    report = _report(incident)
    if report:
        out += ["<details><summary>Root Cause Report (verification, data check)</summary>", "",
                report, "", "</details>", ""]  # fmt: skip
    return out


def _report(incident: Incident) -> str:
    path = Path(incident.report_md or "")
    if not incident.report_md or not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    if len(text) > REPORT_CHARS:
        text = text[:REPORT_CHARS] + f"\n\n_(cut: `patchit report {incident.id}` has it all)_"
    return text


def _status(incident: Incident) -> str:
    if incident.needs_review:
        return f"{incident.status.value} (needs review)"
    return incident.status.value


def _cell(text: str) -> str:
    one = " ".join(text.split()).replace("|", "\\|")
    return one if len(one) <= 200 else one[:197] + "..."
