"""`patchit incidents`: filters and the text table (summaries wrap, never cut)."""

from __future__ import annotations

import re
import shutil
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError
from patchit.memory.records import held_advice

_AGO = re.compile(r"(\d+)\s*([mhdw])")
_UNIT = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
BEING_HEALED = "being healed now"
STOPPED = "stopped before it finished: `patchit heal {id}` resumes it"


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`7d`, `24h`, `30m`, `2w` ago, or a date / ISO time (UTC unless it says otherwise)."""
    now = now or datetime.now(UTC)
    if match := _AGO.fullmatch(text.strip()):
        return now - timedelta(**{_UNIT[match.group(2)]: int(match.group(1))})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInputError(
            f"--since {text!r}: not a time; give a date (2026-11-20), an ISO time, or an age "
            "such as 7d, 24h, 30m"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def keep(row: dict[str, Any], statuses: tuple[str, ...], repo: str | None,
         since: datetime | None) -> bool:  # fmt: skip
    """Whether a listed incident passes the filters."""
    if statuses and row["status"] not in statuses:
        return False
    if repo is not None:
        recorded = row.get("repo_path") or ""
        if not recorded or Path(recorded).resolve() != Path(repo).resolve():
            return False
    if since is not None:
        updated = datetime.fromisoformat(str(row["updated_utc"]))
        if (updated if updated.tzinfo else updated.replace(tzinfo=UTC)) < since:
            return False
    return True


def table(rows: list[dict[str, Any]], live: set[str], width: int | None = None) -> list[str]:
    """One line per incident, its summary wrapped on the lines below it."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    lines = [
        f"{'id':<16} {'status':<10} {'class':<17} {'repository':<14} {'tries':>5} {'tokens':>7} "
        f"{'cost':>8}  {'branch':<25} pr"
    ]
    for r in rows:
        cost = f"${r['cost_usd']:.4f}"
        pull = (
            f"#{r['pr_url'].rstrip('/').rsplit('/', 1)[-1]} {r['pr_state']}" if r["pr_url"] else "-"
        )
        repo = Path(r["repo_path"]).name if r.get("repo_path") else "-"
        lines.append(
            f"{r['id']:<16} {r['status']:<10} {r['classification'] or '-':<17} {repo:<14} "
            f"{r['attempts']:>5} {r['tokens']:>7} {cost:>8}  {r['branch'] or '-':<25} {pull}"
        )
        summary = r["summary"] or ""
        if r["status"] == "open" and r["id"] in live:
            summary = BEING_HEALED  # whatever an earlier run (a record-only one) said
        elif r["status"] == "open" and not summary:
            summary = STOPPED.format(id=r["id"])
        if r.get("review_label"):
            held = f"held for review: {r['review_label']}; {held_advice(r['id'])}"
            summary = f"{summary} ({held})".strip()
        if summary:
            lines += textwrap.wrap(summary, max(40, width - 4), initial_indent="    ",
                                   subsequent_indent="    ", break_long_words=False,
                                   break_on_hyphens=False)  # fmt: skip
    return lines
