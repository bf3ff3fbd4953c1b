"""Applying search/replace edits to a checkout, previewing them, and deriving them from texts.

An `Edit` names a repo-relative file, a `search` text that must occur exactly once in the
file as it is when the edit is applied (edits apply in order, so a later edit sees the
earlier ones), and its `replace` text. An empty `search` creates a file that does not exist
yet. Every edit of a batch is checked before anything is written, so a bad batch leaves the
checkout untouched. Files are read and written as bytes, in their own line ends
(`patchit.patching.lineends`): a search written with LF matches a CRLF file, and the
replacement is written back with CRLF.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from patchit.errors import BadInputError, PatchitError
from patchit.patching.base import Edit
from patchit.patching.lineends import in_convention_of, match_edit, split_lines
from patchit.text.inputs import input_exists, is_regular_file, read_input_bytes, shown
from patchit.text.redaction import clean_text

_PATH_MAX, _NAME_MAX = 4096, 255


class EditError(PatchitError):
    """An edit cannot be applied: its file is missing or outside the repo, or its search text
    does not occur exactly once."""


def resolve_target(root: Path, rel: str) -> Path:
    """The file an edit targets; refuses absolute paths and paths leaving `root`."""
    if not rel or Path(rel).is_absolute() or "\x00" in rel or clean_text(rel) != rel:
        raise EditError(f"{shown(rel)!r}: edit paths must be relative to the repository root")
    root_real = root.resolve()
    target = (root / rel).resolve()
    if not target.is_relative_to(root_real):
        raise EditError(f"{shown(rel)}: resolves outside the repository root {root}")
    if len(os.fsencode(target)) >= _PATH_MAX or any(
        len(os.fsencode(part)) > _NAME_MAX for part in target.parts
    ):
        raise EditError(f"{shown(rel)}: the path is too long for a file")
    return target


def read_text(path: Path, rel: str) -> str:
    try:
        # bytes, not text mode: keep CRLF line ends exactly as they are in the file
        return read_input_bytes(path, what="file to edit").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditError(f"{shown(rel)}: not a UTF-8 text file, refusing to edit it") from exc
    except BadInputError as exc:
        raise EditError(str(exc).replace(shown(path), shown(rel), 1)) from exc


def _edited_texts(root: Path, edits: list[Edit]) -> dict[str, tuple[str, str]]:
    """path -> (text before the batch, text after it), every edit checked."""
    texts: dict[str, tuple[str, str]] = {}
    for number, edit in enumerate(edits, start=1):
        where = f"{edit.path} (edit {number} of {len(edits)})"
        target = resolve_target(root, edit.path)
        if edit.path not in texts:
            if not input_exists(target) and edit.search == "":
                texts[edit.path] = ("", "")
            elif not is_regular_file(target):
                raise EditError(f"{where}: file does not exist in the repository")
            else:
                text = read_text(target, edit.path)
                texts[edit.path] = (text, text)
        before, current = texts[edit.path]
        if edit.search == "":
            if current:
                raise EditError(f"{where}: empty search text is only allowed to create a file")
            texts[edit.path] = (before, edit.replace)
            continue
        found = match_edit(current, edit.search, edit.replace)
        if found.count == 0:
            raise EditError(f"{where}: search text not found: {edit.search[:80]!r}")
        if found.count > 1:
            raise EditError(f"{where}: search text occurs {found.count} times, it must be unique")
        texts[edit.path] = (before, current.replace(found.search, found.replace, 1))
    return texts


def preview_edits(root: Path, edits: list[Edit]) -> dict[str, tuple[str, str]]:
    """Path -> (before, after) for every file the edits touch, without writing anything."""
    return _edited_texts(root, edits)


def apply_edits(root: Path, edits: list[Edit]) -> list[str]:
    """Apply `edits` under `root` in place; returns the repo-relative paths touched, in order."""
    texts = _edited_texts(root, edits)
    for rel, (_, after) in texts.items():
        target = resolve_target(root, rel)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(after.encode("utf-8"))
        except OSError as exc:  # a name too long, a directory where the file goes, ...
            raise EditError(f"{shown(rel)}: cannot write the file ({exc.strerror})") from exc
    return list(texts)


def _is_unique(text: str, part: str) -> bool:
    first = text.find(part)
    return first != -1 and text.find(part, first + 1) == -1


def derive_edits(path: str, before: str, after: str) -> list[Edit]:
    """One `derive_edit` per changed region, top to bottom: each is derived against the text
    as the earlier edits of the list leave it, so the list applies in order."""
    after = in_convention_of(before, after)
    old, new = split_lines(before), split_lines(after)
    hunks = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
             if op[0] != "equal"]  # fmt: skip
    edits: list[Edit] = []
    current = before
    for _tag, _i1, i2, _j1, j2 in hunks:
        following = "".join(new[:j2] + old[i2:])
        edits.append(derive_edit(path, current, following))
        current = following
    return edits


def derive_edit(path: str, before: str, after: str) -> Edit:
    """The smallest whole-line search/replace that turns `before` into `after`.

    The changed lines are widened by neighbouring lines until the search text occurs once in
    `before`, so the edit stays valid when it is applied to that exact text. `after` is
    taken in `before`'s line ends (a line a fix-it built with LF in a CRLF file).
    """
    after = in_convention_of(before, after)
    if before == after:
        raise EditError(f"{path}: no change to express as an edit")
    old, new = split_lines(before), split_lines(after)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    start, old_end, new_end = head, len(old) - tail, len(new) - tail
    while True:
        search = "".join(old[start:old_end])
        if search and _is_unique(before, search):
            return Edit(path=path, search=search, replace="".join(new[start:new_end]))
        if start == 0 and old_end == len(old):
            # the whole file is the only unique span (possible only for repetitive files)
            return Edit(path=path, search=before, replace=after)
        if start > 0:
            start -= 1
        if old_end < len(old):
            old_end += 1
            new_end += 1
