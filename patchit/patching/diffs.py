"""Unified diffs of candidate edits.

Their normalised hash (`normalise_diff`, `diff_hash`) belongs to the attempt memory, which
stores and compares it; it is re-exported here for the callers that make the diffs.
"""

from __future__ import annotations

import difflib

from patchit.memory.diffs import diff_hash as diff_hash  # re-exported
from patchit.memory.diffs import normalise_diff as normalise_diff  # re-exported
from patchit.patching.lineends import split_lines

_NO_NEWLINE = "\\ No newline at end of file"


def unified_diff(path: str, before: str, after: str, context_lines: int = 3) -> str:
    """A git-style unified diff (`a/` and `b/` prefixes) of one file; "" when nothing changed.

    Lines keep their ends (a CRLF file's lines end with CRLF, as in `git diff`), so the diff
    applies with `git apply` to the file byte for byte."""
    if before == after:
        return ""
    out: list[str] = []
    lines = difflib.unified_diff(
        split_lines(before),
        split_lines(after),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
        n=context_lines,
    )
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            # The last line of a file without a trailing newline: say so, as git does.
            out.append(line + "\n" + _NO_NEWLINE + "\n")
    return "".join(out)
