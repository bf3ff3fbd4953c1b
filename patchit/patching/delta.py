"""The breaking change as revertible pieces, and the order a partial revert tries them in.

A changed file (its text at the baseline and at the failing commit) is split, by a line diff,
into hunks; each hunk into slots: a *pair* (a line the change rewrote, matched with the line
it replaced), an *added* line (new in the change) or a *removed* line (the change deleted
it). The smallest revertible piece is an `Atom`: one token group of a rewritten line (so
reverting `amout` -> `amount` keeps the rest of that line), dropping one added line, or
restoring one removed line. A candidate is a set of atoms; `revert_texts` applies it.

`build_plan` orders the candidate sets from fine to coarse: the token groups of the lines the
error names (smallest first), then those lines whole, then every other rewritten or removed
line (a one- or two-character group of it alone first: a dropped comma or quote), then
hunks, then files, then the whole change. The loop lands the first candidate that verifies, so a
passing probe cannot be shrunk afterwards the way ddmin shrinks it: delta debugging is run
bottom-up instead, granularity by granularity, and a set is tried only after the smaller
sets of its own pieces failed. `next_set` walks the plan against the outcomes seen so far:
a set already tried is not tried again, and a set inside one that failed is skipped (with
fewer edits reverted it cannot pass either).

Pure functions on texts: no git, no files.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
_SIMILAR = 0.5  # a rewritten line is matched with the old line it resembles at least this much
_PUNCTUATION = 2  # characters: a token group this small on an unnamed line is tried alone

SlotKind = Literal["pair", "added", "removed"]


@dataclass(frozen=True, order=True)
class Atom:
    """One revertible piece: `part` is the token group of a pair, 0 for the other kinds."""

    path: str
    hunk: int
    slot: int
    part: int = 0


@dataclass(frozen=True)
class Slot:
    kind: SlotKind
    base: str  # the baseline line ("" for an added line)
    fail: str  # the failing commit's line ("" for a removed line)
    line: int  # 1-based line of the failing text at (or before) this slot
    groups: tuple[tuple[int, int, int, int], ...] = ()  # token opcodes of a pair

    def tokens(self) -> tuple[list[str], list[str]]:
        return _TOKEN.findall(self.base), _TOKEN.findall(self.fail)


@dataclass(frozen=True)
class Hunk:
    slots: tuple[Slot, ...]
    fail_start: int  # 0-based index of the hunk's first failing line
    fail_end: int


@dataclass(frozen=True)
class FileChange:
    """One file of the breaking change, split into hunks and slots."""

    path: str
    base_text: str
    fail_text: str
    hunks: tuple[Hunk, ...]

    def atoms(self) -> list[Atom]:
        return [a for h in range(len(self.hunks)) for a in self.hunk_atoms(h)]

    def hunk_atoms(self, hunk: int) -> list[Atom]:
        return [a for s in range(len(self.hunks[hunk].slots)) for a in self.slot_atoms(hunk, s)]

    def slot_atoms(self, hunk: int, slot: int) -> list[Atom]:
        found = self.hunks[hunk].slots[slot]
        parts = range(len(found.groups)) if found.kind == "pair" else range(1)
        return [Atom(self.path, hunk, slot, part) for part in parts]

    def slot_of(self, atom: Atom) -> Slot:
        return self.hunks[atom.hunk].slots[atom.slot]


def split_change(path: str, base_text: str, fail_text: str) -> FileChange:
    """The file's change as hunks of pair / added / removed slots."""
    base = base_text.splitlines(keepends=True)
    fail = fail_text.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, base, fail, autojunk=False)
    hunks = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            hunks.append(Hunk(tuple(_slots(base[i1:i2], fail[j1:j2], j1)), j1, j2))
    return FileChange(path, base_text, fail_text, tuple(hunks))


def _slots(old: list[str], new: list[str], first_line: int) -> list[Slot]:
    matched = _match_lines(old, new)
    slots: list[Slot] = []
    i = j = 0
    for bi, fj in [*matched, (len(old), len(new))]:
        slots += [Slot("removed", line, "", first_line + j) for line in old[i:bi]]
        slots += [
            Slot("added", "", line, first_line + k + 1) for k, line in enumerate(new[j:fj], j)
        ]
        if bi < len(old) and fj < len(new):
            slots.append(_pair(old[bi], new[fj], first_line + fj + 1))
        i, j = bi + 1, fj + 1
    return slots


def _match_lines(old: list[str], new: list[str]) -> list[tuple[int, int]]:
    """Rewritten lines matched with the lines they replaced: position by position when the
    hunk keeps its line count, else each old line with the next new line most like it."""
    if len(old) == len(new):
        return [(k, k) for k in range(len(old))]
    matched: list[tuple[int, int]] = []
    start = 0
    for bi, line in enumerate(old):
        scores = [
            (difflib.SequenceMatcher(None, line, new[fj], autojunk=False).ratio(), -fj)
            for fj in range(start, len(new))
        ]
        if scores and (best := max(scores))[0] >= _SIMILAR:
            matched.append((bi, -best[1]))
            start = -best[1] + 1
    return matched


def _pair(old: str, new: str, line: int) -> Slot:
    old_tokens, new_tokens = _TOKEN.findall(old), _TOKEN.findall(new)
    matcher = difflib.SequenceMatcher(None, old_tokens, new_tokens, autojunk=False)
    groups = tuple((i1, i2, j1, j2) for t, i1, i2, j1, j2 in matcher.get_opcodes() if t != "equal")
    return Slot("pair", old, new, line, groups or ((0, len(old_tokens), 0, len(new_tokens)),))


def revert_texts(changes: Iterable[FileChange], chosen: frozenset[Atom]) -> dict[str, str]:
    """path -> the failing text with the `chosen` atoms reverted, for every file they touch."""
    out: dict[str, str] = {}
    for change in changes:
        if not any(a.path == change.path for a in chosen):
            continue
        text = _revert_file(change, chosen)
        if text != change.fail_text:
            out[change.path] = text
    return out


def _revert_file(change: FileChange, chosen: frozenset[Atom]) -> str:
    fail = change.fail_text.splitlines(keepends=True)
    parts: list[str] = []
    at = 0
    for number, hunk in enumerate(change.hunks):
        parts += fail[at : hunk.fail_start]
        for index, slot in enumerate(hunk.slots):
            parts.append(_revert_slot(change.path, number, index, slot, chosen))
        at = hunk.fail_end
    parts += fail[at:]
    return "".join(parts)


def _revert_slot(path: str, hunk: int, index: int, slot: Slot, chosen: frozenset[Atom]) -> str:
    if slot.kind == "added":
        return "" if Atom(path, hunk, index) in chosen else slot.fail
    if slot.kind == "removed":
        return slot.base if Atom(path, hunk, index) in chosen else ""
    old, new = slot.tokens()
    out: list[str] = []
    at = 0
    for part, (i1, i2, j1, j2) in enumerate(slot.groups):
        out += new[at:j1]
        out += old[i1:i2] if Atom(path, hunk, index, part) in chosen else new[j1:j2]
        at = j2
    out += new[at:]
    return "".join(out)


# -- the plan -------------------------------------------------------------------------------

Named = Callable[[str, Slot], int]  # how directly the error names a slot: 0 not at all


def build_plan(changes: list[FileChange], named: Named, words: set[str]) -> list[frozenset[Atom]]:
    """Candidate sets, finest first (see the module docstring); `changes` in priority order
    (the failing unit's own file first), `words` the names the error mentions."""
    plan: list[frozenset[Atom]] = []
    slots = [
        (change, h, s, slot)
        for change in changes
        for h, hunk in enumerate(change.hunks)
        for s, slot in enumerate(hunk.slots)
    ]
    hot = [x for x in slots if x[3].kind == "pair" and named(x[0].path, x[3])]
    hot.sort(key=lambda x: -named(x[0].path, x[3]))
    for change, h, s, slot in hot:  # 1. token groups of the named lines, then the lines
        atoms = change.slot_atoms(h, s)
        if len(atoms) > 1:
            alone = sorted((a for a in atoms if _keeps_shape(slot, a)),
                           key=lambda a: _cold(slot, a, words))  # fmt: skip
            plan += [frozenset([a]) for a in alone]
        plan.append(frozenset(atoms))
    for change, h, s, slot in slots:  # 2. every other rewritten line, every removed line
        if slot.kind == "added" or (change, h, s, slot) in hot:
            continue
        atoms = change.slot_atoms(h, s)
        if len(atoms) > 1:  # a rewritten line's token groups (a removed line has none)
            smallest = min(atoms, key=lambda a: _cold(slot, a, words))
            small = _cold(slot, smallest, words)[1] <= _PUNCTUATION
            if small and _keeps_shape(slot, smallest):
                plan.append(frozenset([smallest]))  # a dropped comma or quote, the rest kept
        plan.append(frozenset(atoms))
    hunks = [(c, h) for c in changes for h in range(len(c.hunks))]
    hunks.sort(key=lambda ch: not any(named(ch[0].path, s) for s in ch[0].hunks[ch[1]].slots))
    plan += [frozenset(c.hunk_atoms(h)) for c, h in hunks]  # 3. hunks, named first
    plan += [frozenset(c.atoms()) for c in changes]  # 4. files
    plan.append(frozenset(a for c in changes for a in c.atoms()))  # 5. the whole change
    unique: list[frozenset[Atom]] = []
    for chosen in plan:
        if chosen and chosen not in unique:
            unique.append(chosen)
    return unique


def _shape(text: str) -> tuple[int, ...]:
    """Bracket depth and quote parity: what a line must keep to still parse."""
    pairs = (("(", ")"), ("[", "]"), ("{", "}"))
    return (*(text.count(a) - text.count(b) for a, b in pairs), text.count('"') % 2,
            text.count("'") % 2)  # fmt: skip


def _keeps_shape(slot: Slot, atom: Atom) -> bool:
    """Reverting this token group alone leaves the line's brackets and quotes as balanced as
    the baseline's line: `coalesce(` without its `)` is not worth a harness run."""
    line = _revert_slot(atom.path, atom.hunk, atom.slot, slot, frozenset([atom]))
    return _shape(line) == _shape(slot.base)


def _cold(slot: Slot, atom: Atom, words: set[str]) -> tuple[bool, int, int]:
    """Token groups whose failing text the error names come first, then the smallest (a
    typo, a dropped comma), then in line order."""
    old, new = slot.tokens()
    i1, i2, j1, j2 = slot.groups[atom.part]
    size = len("".join(old[i1:i2]).strip()) + len("".join(new[j1:j2]).strip())
    return (not any(t.lower() in words for t in new[j1:j2]), size, atom.part)


Outcome = Literal["failed", "passed", "refused"]


def next_set(
    plan: list[frozenset[Atom]], outcomes: dict[frozenset[Atom], Outcome]
) -> frozenset[Atom] | None:
    """The first set of the plan not tried yet that can still pass, or None."""
    failed = [s for s, o in outcomes.items() if o == "failed"]
    passed = [s for s, o in outcomes.items() if o == "passed"]
    for chosen in plan:
        if chosen in outcomes:
            continue
        if any(chosen <= f for f in failed):  # fewer reverts than a failed set: fails too
            continue
        if any(p <= chosen for p in passed):  # more than a passing set: nothing to learn
            continue
        return chosen
    return None
