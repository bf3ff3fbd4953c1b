"""Tier 0's last resort: a partial revert of the breaking change (SapFix's partial revert).

The change is `git diff <base>..<failing>`, where the base is the project's last good commit
(memory), else the failing commit's parent. Only files the failing unit depends on take part:
dbt: the node's file, its upstream models, macros and YAML (from the run's manifest, else
from its refs); Airflow and Python: the DAG file, the repo modules it imports and the files
the traceback names. `patchit.patching.delta` splits that change into atoms and orders the
candidate sets; this strategy walks them round by round, one candidate a round, reading the
outcome of the previous ones from the attempt history (matched by their normalised diff
hash, made exactly as the trial makes it).

Budget: at most `MAX_RUNS` harness runs of its own (a candidate the harness's screen rejects
costs none, and counts as failed for the search), and never past the fingerprint's
`loop.max_attempts`; a diff already in the history is never proposed again (but one held for
review because it reverted an intent is, once `[policy] revert = "allow"`). Each candidate's
tag is a sub-bucket `partial_revert:<hash>`: memory refuses a tag that failed once, and each
reverted set is a new experiment, not a variant (a set reverting less than one that failed,
the variant that cannot help, is pruned here).

Once another strategy's candidate has passed by undoing an intent of the change and is held
for review (a deleted model restored), the partial revert spends no runs: whatever it found
would be one more revert to review.

Review rule: changing existing code back is a fix. Dropping a line the change *added* drops
new behaviour, so such a candidate carries a `review` (it ends `needs_review`, never on a
branch) unless what it drops is unused once the rest is restored (a Python import or a helper
`def`/`class` that nothing left refers to, a blank or comment line). When the failure is a
check that failed on what the code now computes (a data test: the code ran), putting back
more than a slip of a line the change rewrote is reviewed too (`status` rewritten as a CASE
mapping 'returned' to 'refunded' is what the author meant; a slip is punctuation or blanks,
or a word one character off), unless `[policy] revert = "allow"`. Code that does not run at
all (a conversion error on `coalesce(cancelled_on, 'never')` cast to a date) is changed back
as a fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from patchit.errors import VcsError
from patchit.evidence.gitlog import breaking_base, changed_files
from patchit.evidence.intents import one_slip
from patchit.evidence.model import Evidence
from patchit.evidence.unit_files import dependency_files
from patchit.memory.diffs import diff_hash
from patchit.memory.records import REVERTS
from patchit.patching.apply import derive_edit
from patchit.patching.base import PatchCandidate, PriorAttempt, Proposal, ProposalRequest
from patchit.patching.delta import (
    Atom,
    FileChange,
    Named,
    Outcome,
    Slot,
    build_plan,
    next_set,
    revert_texts,
    split_change,
)
from patchit.patching.diffs import unified_diff
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git, show_file

MAX_RUNS = 4  # harness runs this strategy spends on one fingerprint
MAX_ROUNDS = 24  # a hard stop whatever the history says
MAX_PLAN = 60  # candidate sets considered (the budget reaches a handful of them)
_TRIED = ("verified", "failed", "needs_review")
# a set the harness's screen rejected (it does not bind, does not compile) failed as surely as
# one the harness ran, and cost no run: it takes part in the search, not in MAX_RUNS
_OUTCOME: dict[str, Outcome] = {
    "verified": "passed", "needs_review": "passed", "failed": "failed", "screened_out": "failed",
}  # fmt: skip
_QUOTED = re.compile(r"""["'`]([^"'`\n]{1,80})["'`]""")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ALNUM = re.compile(r"\w+")
_SECRET = re.compile(r"(^|/)(\.env[^/]*|[^/]*\.env|[^/]*secret[^/]*|[^/]*credential[^/]*)$", re.I)
_IMPORT = re.compile(r"^\s*(?:from\s+\S+\s+)?import\s+(.+)$")
_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class BreakingChange:
    """The part of the change base..failing in the files the failing unit depends on."""

    base: str
    source: str
    failing: str
    files: list[FileChange]


class PartialRevertStrategy:
    """Reverts the fewest pieces of the breaking change that turn the failing unit green."""

    name: ClassVar[str] = "partial_revert"
    tag: ClassVar[str] = "partial_revert"
    tier: ClassVar[int] = 0
    rank: ClassVar[int] = 100  # general: after every targeted fix-it of tier 0

    def __init__(self) -> None:
        # sets offered per incident: the search drops a tier-0 candidate another strategy
        # already offered without recording it, and such a set must not come back forever
        self._offered: dict[str, list[frozenset[Atom]]] = {}

    def propose(self, request: ProposalRequest) -> Proposal:
        if request.round == 1:
            self._offered.pop(request.incident_id, None)
        if request.round > MAX_ROUNDS:
            return Proposal()
        change = read_breaking_change(request.evidence)
        if change is None or not change.files:
            return Proposal()
        history = request.history
        own = sum(1 for h in history if _mine(h.tag) and h.outcome in _TRIED)
        spent = sum(1 for h in history if h.outcome in _TRIED)
        if own >= MAX_RUNS or spent >= request.config.loop.max_attempts:
            return Proposal(notes=[f"partial revert: run budget spent ({own} of {MAX_RUNS})"])
        if request.config.policy.revert != "allow" and (held := _held_revert(history)):
            return Proposal(
                notes=[
                    f"partial revert: no runs spent: {held} passed and is held "
                    f"for review ({REVERTS}), as any other revert would be"
                ]
            )
        words = _error_words(request.evidence)
        plan = build_plan(change.files, _named(request.evidence, change.files), words)
        plan = [s for s in plan[:MAX_PLAN] if _files(s) <= request.config.policy.max_files]
        if request.config.policy.revert == "allow":  # what review held for undoing an intent
            history = [h for h in history if not (h.outcome == "needs_review"  # may land now
                                                  and REVERTS in h.reason)]  # fmt: skip
        outcomes, progress = _outcomes(change, plan, history, words)
        if progress is not None:  # keep what moved the failure on, and add to it
            plan = list(dict.fromkeys([progress | s for s in plan if not s <= progress] + plan))
            outcomes.update(_outcomes(change, plan, history, set())[0])
        for offered in self._offered.get(request.incident_id, []):
            outcomes.setdefault(offered, "refused")
        chosen = next_set(plan, outcomes)
        if chosen is None:
            return Proposal()
        self._offered.setdefault(request.incident_id, []).append(chosen)
        # a check that failed on what the rewritten code now computes (the code ran): putting
        # the rewrite back is undoing the change, which only `revert = "allow"` lets land
        rewrites = (
            request.evidence.event.status == "fail" and request.config.policy.revert != "allow"
        )
        candidate = self._candidate(change, chosen, rewrites)
        if candidate is None:
            return Proposal()
        outcomes[chosen] = "refused"
        more = own + 1 < MAX_RUNS and next_set(plan, outcomes) is not None
        return Proposal(candidates=[candidate], more=more)

    def close(self) -> None:
        """Nothing to release."""

    def _candidate(
        self, change: BreakingChange, chosen: frozenset[Atom], rewrites: bool = True
    ) -> PatchCandidate | None:
        texts = revert_texts(change.files, chosen)
        if not texts:
            return None
        edits = [derive_edit(c.path, c.fail_text, texts[c.path]) for c in change.files
                 if c.path in texts]  # fmt: skip
        return PatchCandidate(
            strategy=self.name,
            # a sub-bucket per reverted set: memory refuses a failed bucket, and every set
            # is its own experiment (reverting less than a failed set is pruned here instead)
            tag=f"{self.tag}:{diff_hash(candidate_diff(change.files, chosen))[:8]}",
            edits=edits,
            rationale=describe(change, chosen),
            confidence=0.6,
            review=review_reason(change.files, chosen, texts, rewrites),
        )


def _held_revert(history: list[PriorAttempt]) -> str:
    """The tag of another strategy's candidate that passed undoing an intent of the change and
    is held for review ("" when none): the change is only made green by undoing it, and a
    partial revert could only add another revert to review. (Its own held sets do not stop it:
    a smaller set may revert a slip only.)"""
    for h in history:
        if h.outcome == "needs_review" and REVERTS in h.reason and not _mine(h.tag):
            return h.tag
    return ""


def _mine(tag: str) -> bool:
    return tag == PartialRevertStrategy.tag or tag.startswith(f"{PartialRevertStrategy.tag}:")


# -- reading the change ---------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return run_git(repo, *args, timeout_s=QUERY_TIMEOUT_S)


def _resolve(repo: Path, rev: str) -> str | None:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
    except VcsError:
        return None


change_base = breaking_base  # its name for the fix-its that import it from here


def _show(repo: Path, commit: str, path: str) -> str | None:
    try:  # byte for byte: the revert's edits must match a CRLF file as it is
        return show_file(repo, commit, path)
    except VcsError:
        return None


def read_breaking_change(evidence: Evidence) -> BreakingChange | None:
    """The change base..failing in the unit's dependency files (read-only git queries)."""
    event = evidence.event
    repo = Path(event.repo_path or evidence.repo_root)
    failing = event.commit or "HEAD"
    try:
        found = change_base(repo, failing, evidence.last_good_commit)
        if found is None:
            return None
        base, source = found
        changed = changed_files(repo, base, failing)
    except VcsError:
        return None
    files: list[FileChange] = []
    for path in dependency_files(evidence, changed):
        if _SECRET.search(path):
            continue
        before, after = _show(repo, base, path), _show(repo, failing, path)
        if before is None or after is None or before == after or "\x00" in before + after:
            continue  # added or deleted whole: no older line to go back to
        files.append(split_change(path, before, after))
    return BreakingChange(base, source, failing, files)


# -- what the error names -------------------------------------------------------------------


def _error_words(evidence: Evidence) -> set[str]:
    """Identifiers quoted in the error message (`"amout"`, `'amout'`)."""
    text = "\n".join(p for p in (evidence.error, evidence.event.error_message) if p)
    return {w.lower() for q in _QUOTED.findall(text) for w in _WORD.findall(q) if len(w) > 1}


def _named(evidence: Evidence, files: list[FileChange]) -> Named:
    """A changed line the error names: a traceback frame's line, a line holding a name the
    error quotes, or the line just before one (a parser stops at the token after a dropped
    comma: `syntax error at or near "count"`)."""
    words = _error_words(evidence)
    frames = {(f.path, f.line) for f in evidence.frames}
    lines = {c.path: c.fail_text.splitlines() for c in files}

    def says(text: str) -> bool:
        return any(w.lower() in words for w in _WORD.findall(text))

    def named(path: str, slot: Slot) -> int:
        if (path, slot.line) in frames or says(slot.fail):
            return 2
        after = lines.get(path, [])[slot.line : slot.line + 1]
        return int(slot.kind == "pair" and bool(after) and says(after[0]))

    return named


def _files(chosen: frozenset[Atom]) -> int:
    return len({a.path for a in chosen})


def _outcomes(
    change: BreakingChange,
    plan: list[frozenset[Atom]],
    history: list[PriorAttempt],
    words: set[str],
) -> tuple[dict[frozenset[Atom], Outcome], frozenset[Atom] | None]:
    """The plan's sets already in the history (by normalised diff hash), with their outcome;
    and the last failed set that moved the failure on (its run no longer names what the
    error named: ddmin's progress, the base of the next sets), if any."""
    attempts = {h.diff_hash: h for h in history}
    found: dict[frozenset[Atom], Outcome] = {}
    progress: tuple[int, frozenset[Atom]] | None = None
    order = {h.diff_hash: n for n, h in enumerate(history)}
    for chosen in plan:
        digest = diff_hash(candidate_diff(change.files, chosen))
        if (attempt := attempts.get(digest)) is None:
            continue
        found[chosen] = _OUTCOME.get(attempt.outcome, "refused")
        moved = found[chosen] == "failed" and _moved_on(attempt, words)
        if moved and (progress is None or order[digest] > progress[0]):
            progress = (order[digest], chosen)
    return found, progress[1] if progress else None


def _moved_on(attempt: PriorAttempt, words: set[str]) -> bool:
    """The run failed, but no longer on any name the original error quoted."""
    output = f"{attempt.reason}\n{attempt.output}".lower()
    return bool(words) and bool(attempt.output.strip()) and not any(w in output for w in words)


def candidate_diff(files: list[FileChange], chosen: frozenset[Atom]) -> str:
    """The diff the trial will make of this set's edits (same files, same order)."""
    texts = revert_texts(files, chosen)
    return "".join(unified_diff(c.path, c.fail_text, texts[c.path]) for c in files
                   if c.path in texts)  # fmt: skip


# -- the report's words and the review rule -------------------------------------------------


def _slot_text(slot: Slot, atoms: list[Atom], reverted: bool) -> str:
    """A reverted piece as `failing` -> `restored`; a kept one as the change made it."""
    if slot.kind == "added":
        return f"dropped added {_line(slot.fail)}" if reverted else f"added {_line(slot.fail)}"
    if slot.kind == "removed":
        return f"restored removed {_line(slot.base)}" if reverted else f"removed {_line(slot.base)}"
    old, new = slot.tokens()
    whole = len(atoms) == len(slot.groups)
    spans = [(slot.fail, slot.base)] if whole else [
        ("".join(new[j1:j2]), "".join(old[i1:i2]))
        for i1, i2, j1, j2 in (slot.groups[a.part] for a in atoms)
    ]  # fmt: skip
    pairs = [(f.strip(), b.strip()) if reverted else (b.strip(), f.strip()) for f, b in spans]
    text = ", ".join(_edit_text(x, y, reverted) for x, y in pairs)
    return text if whole or not reverted else f"{text} (rest of the line kept)"


def _line(text: str) -> str:
    """A whole line as the report quotes it; a blank one is named, not quoted as `` ` ` ``."""
    return f"line `{text.strip()}`" if text.strip() else "a blank line"


def _edit_text(old: str, new: str, reverted: bool) -> str:
    if not old and not new:
        return "whitespace"
    if not old:
        return f"{'restored' if reverted else 'added'} `{new}`"
    if not new:
        return f"{'dropped' if reverted else 'removed'} `{old}`"
    return f"`{old}` -> `{new}`"


def _pieces(files: list[FileChange], atoms: set[Atom], reverted: bool) -> list[str]:
    out = []
    for change in files:
        for h, hunk in enumerate(change.hunks):
            for s, slot in enumerate(hunk.slots):
                mine = [a for a in change.slot_atoms(h, s) if a in atoms]
                if mine:
                    out.append(f"{change.path}:{slot.line} {_slot_text(slot, mine, reverted)}")
    return out


def describe(change: BreakingChange, chosen: frozenset[Atom]) -> str:
    """The rationale: the commit, the edits reverted and the edits kept."""
    every = {a for c in change.files for a in c.atoms()}
    reverted = _pieces(change.files, set(chosen), reverted=True)
    kept = _pieces(change.files, every - chosen, reverted=False)
    shown = "; ".join(kept[:4]) + (f"; and {len(kept) - 4} more" if len(kept) > 4 else "")
    return (
        f"partial revert of the change {change.base[:12]}..{change.failing[:12]} "
        f"(base: {change.source}): reverted {'; '.join(reverted)}; "
        + (f"kept {len(kept)} other edit(s): {shown}" if kept else "nothing else changed")
    )


def review_reason(
    files: list[FileChange], chosen: frozenset[Atom], texts: dict[str, str], rewrites: bool = True
) -> str:
    """Why the candidate needs a human even if it verifies: it drops code the change added
    that is still in use, or (`rewrites`) puts back more than a slip of a line the change
    rewrote (see the module docstring); "" when it only puts slips right."""
    for change in files:
        dropped = [
            change.slot_of(a)
            for a in sorted(chosen)
            if a.path == change.path and change.slot_of(a).kind == "added"
        ]
        left = set(_WORD.findall(texts.get(change.path, change.fail_text)))
        for slot in dropped:
            if not _unused(change.path, slot, left, dropped):
                return (
                    f"it drops code the breaking change added ({change.path}:{slot.line} "
                    f"`{slot.fail.strip()}`), which removes new behaviour"
                )
        for atom in sorted(a for a in chosen if a.path == change.path and rewrites):
            pair = change.slot_of(atom)
            if pair.kind == "pair" and (undone := _rewritten(pair, atom)):
                return (
                    f"it undoes what the breaking change rewrote ({change.path}:{pair.line} "
                    f"{undone}), more than a slip: a human decides whether the rewrite or what "
                    "failed on it is wrong"
                )
    return ""


def _rewritten(slot: Slot, atom: Atom) -> str:
    """`now` -> `was` when putting this token group of a rewritten line back undoes more than
    a slip, else "". A slip is punctuation and blanks alone (a dropped comma, a lost quote, an
    indent) or one word for a word one character away (`amout` for `amount`): found on
    jaffle_shop_duckdb, where `status` rewritten as `case when status = 'returned' then
    'refunded' else status end as status` was put back and called fixed."""
    old, new = slot.tokens()
    i1, i2, j1, j2 = slot.groups[atom.part]
    was, now = old[i1:i2], new[j1:j2]
    words_was = [t for t in was if _ALNUM.fullmatch(t)]
    words_now = [t for t in now if _ALNUM.fullmatch(t)]
    if not words_was and not words_now:
        return ""
    if len(words_was) == len(words_now) == 1 and (
        one_slip(words_was[0], words_now[0]) or words_was[0].lower() == words_now[0].lower()
    ):
        return ""
    return f"`{slot.fail.strip()}` -> `{slot.base.strip()}`"  # the lines: a group alone reads oddly


def _unused(path: str, slot: Slot, left: set[str], dropped: list[Slot]) -> bool:
    line = slot.fail
    text = line.strip()
    if not text or text.startswith(("#", "--")):
        return True
    if not path.endswith(".py"):
        return False
    if match := _IMPORT.match(line):
        names = [p.split(" as ")[-1].strip(" ()").split(".")[0] for p in match.group(1).split(",")]
        return all(n and n not in left for n in names)
    if match := _DEF.match(line):
        return match.group(1) not in left
    # a body line of a dropped helper: the nearest dropped def/class above, indented less
    owners = [
        match.group(1)
        for d in dropped
        if d.line < slot.line and (match := _DEF.match(d.fail)) and _indent(d.fail) < _indent(line)
    ]
    return bool(owners) and owners[-1] not in left


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
