"""A near name is evidence, not proof: the one judgement every near-name fix-it makes before
it rewrites a name the breaking change wrote.

A name the change did not write (existing code, broken by an upstream rename or a dropped
column) keeps the fix-its' own rule: the one near name wins. A name the change wrote is the
author's new intent, and the nearest existing name is only a guess at it: a `bill_address_key`
the project lacks is far more likely a column the author meant to add than a misspelt
`ship_address_key`, and the swap builds green while every billing city becomes the shipping
city. There the substitution is taken only when it reads as a slip (`patchit.evidence.slips`)
and it is the only near name that does. Otherwise the candidate is still proposed, carrying a
`review` that names the alternatives and why: it can verify, and it ends `needs_review`, never
on a branch.

"Wrote": a line the breaking diff (`evidence.breaking_diff`: the last good commit, else the
failing commit's parent, to the failing commit) added or rewrote uses the name, and none of
the lines it took away did (a line only re-indented or re-punctuated keeps its old names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from patchit.evidence.gitlog import split_diff
from patchit.evidence.model import Evidence
from patchit.evidence.similarity import DEFAULT_MIN_RATIO, name_ratio, normalise_name
from patchit.evidence.slips import judge_slip

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@")
MAX_ALTERNATIVES = 4


def change_wrote(evidence: Evidence, path: str, name: str) -> int | None:
    """The first line of `path` (in the failing commit) where the breaking change wrote
    `name`; None when it wrote no such line, or took the name away as well."""
    part = split_diff(evidence.breaking_diff).get(path)
    if not part or not name:
        return None
    word = re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")
    line, first = 0, None
    for text in part.splitlines():
        if hunk := _HUNK.match(text):
            line = int(hunk.group("start"))
        elif not line or text.startswith("\\"):
            continue
        elif text.startswith("-"):
            if word.search(text[1:]):
                return None  # the name was there before: the change only moved it
        elif text.startswith("+"):
            if first is None and word.search(text[1:]):
                first = line
            line += 1
        else:
            line += 1
    return first


def _near(old: str, pool: Iterable[str]) -> list[str]:
    """The names in `pool` near `old`, nearest first (one per normalised spelling)."""
    seen: dict[str, str] = {}
    for name in sorted(set(pool), key=lambda c: (-name_ratio(old, c), c)):
        if name != old and name_ratio(old, name) >= DEFAULT_MIN_RATIO:
            seen.setdefault(normalise_name(name), name)
    return list(seen.values())


def near_name_review(
    evidence: Evidence,
    paths: Iterable[str],
    old: str,
    new: str,
    pool: Iterable[str],
    kind: str = "name",
) -> str:
    """Why a human must choose before `old` becomes `new` ('' when it may be taken).

    `paths`: the files the candidate rewrites `old` in; `pool`: every name the fix-it chose
    from; `kind`: what the name is ("column", "key", ...), for the review's words."""
    where = next(
        (f"{p}:{n}" for p in dict.fromkeys(paths) if (n := change_wrote(evidence, p, old))), None
    )
    if where is None:
        return ""  # existing code: the fix-it's own rule stands
    near = _near(old, [*pool, new])
    verdict = judge_slip(old, new)
    fits = [c for c in near if judge_slip(old, c).slip]
    if verdict.slip and all(normalise_name(c) == normalise_name(new) for c in fits):
        return ""  # a slip, and no other near name is one
    others = [f"`{c}`" for c in near if c != new][:MAX_ALTERNATIVES]
    meant = f"a {kind} `{old}` the change may have meant to add"
    alternatives = f"{', '.join(others)}, or {meant}" if others else meant
    if not verdict.slip:
        return (
            f"`{old}` is not a typo of `{new}`: {verdict.why}, on a line this change wrote "
            f"({where}); alternatives: {alternatives}"
        )
    shown = ", ".join(f"`{c}`" for c in fits)
    return (
        f"`{old}` may be a typo of {shown}: more than one near {kind} fits a name this change "
        f"wrote ({where}); alternatives: {alternatives}"
    )
