"""How the policy counts a candidate that follows a rename to every site.

A column, model or macro renamed by the breaking change is one decision of its author; the
candidate that follows it to twelve consumers makes that one decision twelve times. Counting
each consumer against `max_files` would refuse exactly the fix that completes the change
(and invite one-file candidates that each fail on the next consumer). So a candidate may
declare the renames it follows (`PatchCandidate.follows`, old -> new), and a file whose every
change only swaps an old name for its new one (adding `as old` where a select item keeps its
output name) is a *site* of those renames: the sites together count as one edit kind per
rename against `max_files`, their number is capped by `max_rename_sites`, and `max_lines`
holds for the largest site. The declaration is checked, not trusted: a file with any other
change counts as a file of its own.
"""

from __future__ import annotations

import difflib
import re

_TOKEN = re.compile(r"\w+|\S")


def is_rename_site(before: str, after: str, follows: dict[str, str]) -> bool:
    """Whether every change from `before` to `after` only follows the declared renames."""
    olds = {o.lower() for o in follows}
    allowed = olds | {n.lower() for n in follows.values()} | {"as"}
    old, new = _TOKEN.findall(before), _TOKEN.findall(after)
    changed = False
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        changed = True
        if any(t.lower() not in olds for t in old[i1:i2]):
            return False
        if any(t.lower() not in allowed for t in new[j1:j2]):
            return False
    return changed and bool(follows)


def count_files(contents: dict[str, tuple[str, str]], follows: dict[str, str],
                max_files: int, max_rename_sites: int) -> tuple[set[str], str | None]:  # fmt: skip
    """(the rename sites among `contents` {path: (before, after)}, why the files are too many
    or None): the sites count as one file per rename they follow, and may be at most
    `max_rename_sites`."""
    sites = {path for path, (before, after) in contents.items()
             if is_rename_site(before, after, follows)}  # fmt: skip
    if len(sites) > max_rename_sites:
        return sites, (
            f"follows {', '.join(follows)} to {len(sites)} files, more than "
            f"max_rename_sites={max_rename_sites}"
        )
    kinds = len(set(contents) - sites) + (len(follows) if sites else 0)
    if kinds > max_files:
        counted = f" (the {len(sites)} sites of its renames count as {len(follows)})"
        return sites, f"touches {kinds} files, more than max_files={max_files}" + (
            counted if sites else ""
        )
    return sites, None
