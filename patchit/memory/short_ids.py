"""Incident ids as people type them: `20261125-7f2ec7` in full, or its hex part `7f2ec7`, or a
prefix of either long enough to name one incident (`7f2e`, `20261125-7f`).

Ids are long because they carry the day; in a terminal people copy the six hex digits. A
short id that names more than one incident is refused with the candidates, never guessed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from patchit.errors import BadInputError

if TYPE_CHECKING:
    from patchit.memory.store import Memory

_FULL = re.compile(r"\d{8}-[0-9a-f]{6}")
_DAY_PREFIX = re.compile(r"\d{8}-[0-9a-f]{1,5}")
_HEX = re.compile(r"[0-9a-f]{3,6}")
SHORT_ID = re.compile(rf"{_FULL.pattern}|{_DAY_PREFIX.pattern}|{_HEX.pattern}")


def looks_like_incident_id(text: str) -> bool:
    return bool(SHORT_ID.fullmatch(text.strip().lower()))


def resolve_incident_id(memory: Memory, text: str) -> str:
    """The one incident id `text` names; BadInputError when it names none or several."""
    wanted = text.strip().lower()
    if _FULL.fullmatch(wanted) or not looks_like_incident_id(wanted):
        return wanted  # the store's own lookup says "not found" with its hint
    pattern = f"{wanted}%" if "-" in wanted else f"%-{wanted}%"
    rows = memory._rows(
        "select id from incidents where id like ? order by id desc limit 6", (pattern,)
    )
    ids = [str(row["id"]) for row in rows if _names(str(row["id"]), wanted)]
    if len(ids) == 1:
        return ids[0]
    if not ids:
        raise BadInputError(
            f"incident {text!r} not found in {memory.where}; run `patchit incidents` to list them"
        )
    shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
    raise BadInputError(f"incident {text!r} names several incidents ({shown}); give more of the id")


def _names(incident_id: str, wanted: str) -> bool:
    # `like` is a pattern match; the hex part must start with what was typed, nothing looser
    tail = incident_id.partition("-")[2]
    return incident_id.startswith(wanted) if "-" in wanted else tail.startswith(wanted)
