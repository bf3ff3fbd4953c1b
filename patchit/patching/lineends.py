"""Line endings kept: an edit reads and writes a file byte for byte, in the file's convention.

A file checked out with CRLF line ends (a Windows editor's YAML, `* text eol=crlf`) stays
CRLF when patchit edits it, and a final newline, or its absence, stays as it was. The texts
an edit is made from do not always carry the file's ends: the breaking change read through
git, a model that copies a search text with LF, a fix-it that builds a new line with "\\n".
So a `search` written with LF matches a CRLF file (normalised for matching only), and the
`replace` text is written back in the file's own line ends. A file that mixes both has no
convention: it is matched and written exactly as the edit says.

Lines are split on "\\n" only, as git splits them: `str.splitlines` also breaks at a form
feed or U+2028, where git sees no line end, and a diff made from those lines would not apply.
"""

from __future__ import annotations

from dataclasses import dataclass

CRLF, LF = "\r\n", "\n"


def split_lines(text: str) -> list[str]:
    """The lines of `text` with their ends ("\\n" or "\\r\\n"), split where git splits them;
    joined they give `text` back byte for byte."""
    parts = text.split(LF)
    lines = [part + LF for part in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def convention(text: str) -> str | None:
    """The file's line end: CRLF when every line end is CRLF, LF when none is, None when it
    mixes both. A text without any line end follows LF (nothing to keep)."""
    crlf = text.count(CRLF)
    if crlf == 0:
        return LF
    return CRLF if crlf == text.count(LF) else None


def with_ends(text: str, eol: str) -> str:
    """`text` with every line end written as `eol`; nothing else changes."""
    plain = text.replace(CRLF, LF)
    return plain if eol == LF else plain.replace(LF, CRLF)


def in_convention_of(file_text: str, text: str) -> str:
    """`text` (a replacement, a rewritten file) in `file_text`'s line ends; as it is when
    `file_text` mixes them."""
    eol = convention(file_text)
    return text if eol is None else with_ends(text, eol)


@dataclass(frozen=True)
class Match:
    """Where an edit lands in a file: the file's own text for the edit's `search`, how often
    it occurs, and the edit's `replace` in the file's line ends."""

    search: str
    replace: str
    count: int


def match_edit(text: str, search: str, replace: str) -> Match:
    """The edit `search` -> `replace` as it applies to `text`, byte-faithfully.

    `search` as given first; when it is not there, `search` in the file's line ends (an LF
    search on a CRLF file); when a search that ends a line is still not there and the file
    ends without a newline, the search without its last line end at the very end of the file
    (the replacement then ends without one too, so the absence is kept)."""
    replace = in_convention_of(text, replace)
    count = text.count(search)
    if count or not search:
        return Match(search, replace, count)
    eol = convention(text)
    if eol is not None and (fitted := with_ends(search, eol)) != search:
        search = fitted
        count = text.count(search)
        if count:
            return Match(search, replace, count)
    if search.endswith(LF) and not text.endswith(LF):
        bare = search.removesuffix(LF).removesuffix("\r")
        if bare and text.endswith(bare) and text.count(bare) == 1:
            end = CRLF if replace.endswith(CRLF) else LF if replace.endswith(LF) else ""
            return Match(bare, replace.removesuffix(end), 1)
    return Match(search, replace, 0)
