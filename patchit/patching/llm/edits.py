"""Checking the model's edits against the files before anything is verified.

A model copies text imperfectly, mostly in whitespace. An edit whose `search` text does not
occur exactly once gets one whitespace-tolerant retry: runs of spaces and tabs match any run,
indentation and trailing whitespace are ignored per line, CRLF matches LF. A single tolerant
match rewrites `search` to the file's exact text; anything else rejects the candidate with a
reason the loop records and the next round reads. The `replace` text is written in the file's
line ends (a model writes LF; a CRLF file stays CRLF), as `apply_edits` writes it.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from patchit.errors import PatchitError
from patchit.patching.apply import EditError, read_text, resolve_target
from patchit.patching.base import Edit
from patchit.patching.lineends import in_convention_of, match_edit
from patchit.patching.llm.answers import EditAnswer
from patchit.text.inputs import input_exists, is_regular_file, shown


class EditRejected(PatchitError):
    """An edit of a model's candidate cannot apply; the message says which and why."""


def tolerant_pattern(search: str) -> re.Pattern[str]:
    """`search` as a regex that ignores differences in spaces/tabs runs and line ends."""
    lines = []
    parts = search.split("\n")
    for number, line in enumerate(parts):
        tokens = [t for t in re.split(r"[ \t]+", line.strip(" \t\r")) if t]
        body = r"[ \t]+".join(re.escape(t) for t in tokens)
        # indentation: any run on inner lines; on the first line only when the search has
        # some (it may start mid-line); none after a final newline (the next line's own)
        indent = number > 0 or line[:1] in (" ", "\t")
        last_empty = number == len(parts) - 1 and not tokens
        lines.append(body if last_empty or not indent else r"[ \t]*" + body)
    return re.compile(r"[ \t]*\r?\n".join(lines))


def _clean_path(raw: str) -> str:
    path = raw.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def _target(root: Path, rel: str, where: str) -> Path:
    """The file an edit targets (patching.apply's rules), the failure said in `where`'s terms."""
    if not rel or PurePosixPath(rel).is_absolute() or Path(rel).is_absolute():
        raise EditRejected(f"{where}: the path must be relative to the repository root")
    try:
        return resolve_target(root, rel)
    except EditError as exc:  # a path that resolves outside, or cannot name a file
        leaves = "outside" in str(exc)
        reason = "the path leaves the repository" if leaves else "the path cannot name a file"
        raise EditRejected(f"{where}: {reason}") from exc


def _read(target: Path, where: str) -> str:
    try:
        return read_text(target, where)
    except EditError as exc:
        raise EditRejected(str(exc)) from exc


def _locate(text: str, search: str, replace: str, where: str, notes: list[str]) -> tuple[str, str]:
    """The exact text of the file to replace, `search` as the file has it (its line ends,
    `lineends.match_edit`) or its one tolerant match; and `replace` in the file's line ends."""
    found = match_edit(text, search, replace)
    exact = found.count
    if exact == 1:
        return found.search, found.replace
    if not search.strip():
        raise EditRejected(f"{where}: the search text is only whitespace")
    matches = [m.group(0) for m in tolerant_pattern(search).finditer(text) if m.group(0)]
    if exact == 0 and len(matches) == 1:
        notes.append(f"{where}: search text matched after ignoring whitespace differences")
        return matches[0], in_convention_of(text, replace)
    if exact > 1:
        raise EditRejected(
            f"{where}: search text found {exact} times, it must be unique "
            "(include a neighbouring line)"
        )
    if matches:
        raise EditRejected(
            f"{where}: search text not found exactly, and found {len(matches)} times "
            "ignoring whitespace"
        )
    raise EditRejected(f"{where}: search text not found, even ignoring whitespace: {search[:80]!r}")


def resolve_edits(root: Path, answers: list[EditAnswer], notes: list[str]) -> list[Edit]:
    """The model's edits as `Edit`s that apply to `root` in order, or EditRejected.

    Edits apply in sequence (a later edit sees the earlier ones), as `apply_edits` does.
    """
    if not answers:
        raise EditRejected("the candidate has no edits")
    texts: dict[str, str] = {}
    edits: list[Edit] = []
    for number, answer in enumerate(answers, start=1):
        rel = _clean_path(answer.file)
        where = f"{shown(rel) or '<no file>'} (edit {number} of {len(answers)})"
        target = _target(root, rel, where)
        if rel not in texts:
            if is_regular_file(target):
                texts[rel] = _read(target, where)
            elif not input_exists(target) and answer.search == "":
                texts[rel] = ""
            else:
                raise EditRejected(f"{where}: the file does not exist in the repository")
        current = texts[rel]
        if answer.search == "":
            if current:
                raise EditRejected(f"{where}: empty search text is only allowed to create a file")
            search, replace = "", answer.replace
        else:
            search, replace = _locate(current, answer.search, answer.replace, where, notes)
        if search == replace:
            raise EditRejected(f"{where}: the edit changes nothing")
        texts[rel] = current.replace(search, replace, 1) if search else replace
        edits.append(Edit(path=rel, search=search, replace=replace))
    return edits
