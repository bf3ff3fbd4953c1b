"""What the breaking diff meant to change: the lines of `git diff baseline..failing` that the
candidate kept.

The rule, per changed file:
- A changed line of the breaking diff that the candidate's patch rewrites (its text is among
  the lines the patch removes from the failing commit) was *repaired*: its change was the bug,
  not an intention, so it means nothing. Its paired removed line (same position in a hunk with
  as many removed as added lines) goes with it; in an unbalanced hunk with a repaired line,
  only the added lines the patch kept count.
- Every other changed line (added or removed) was *kept*: the breaking commit meant it.
  So was a line the patch only re-punctuated (the comma a new select item left out, added to
  that very line): the column it defines is what the change meant, and the fix keeps it.
- dbt: the relation built from a changed model file may differ, per kept line (comments
  stripped): in the column a select item defines (`... as col` or a bare `alias.col`); in
  everything ("*") when the line changes which rows there are (it starts with `where`, `and`,
  `or`, `join`, `on`, `from`, `group by`, `having`, `qualify`, `union`, `limit`, ...); else
  in the output columns it names, or everything when it names none.
- Airflow: an XCom key or a written file may differ when its key / file name is named in a
  kept line; the `return_value` XCom when a kept line contains `return`. An output the
  baseline never wrote is also meant when the breaking change introduced its name on a line
  the candidate repaired and the candidate's own lines still name it (`carried_forward`): a
  forward fix rewrites the line that holds the bug (`{{ execution_date }}` ->
  `{{ logical_date }}`) and keeps the new file that line writes; there is nothing to compare
  it with, and dropping the line instead would lose it.
So an intended change on the very line the fix had to repair counts as unintended: such a
candidate is escalated for review, never shipped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git

ALL = "*"  # the whole relation may differ
_DIFF = ("diff", "-U0", "--no-color", "--no-renames")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMENT = re.compile(r"(--|#).*$")


@dataclass
class Hunk:
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


def parse_diff(text: str) -> dict[str, list[Hunk]]:
    """`git diff -U0` output -> file (new path, or old path if deleted) -> hunks."""
    files: dict[str, list[Hunk]] = {}
    current: list[Hunk] | None = None
    old_path = ""
    for line in text.splitlines():
        if line.startswith("--- "):
            old_path = line[6:] if line.startswith("--- a/") else ""
        elif line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else old_path
            current = files.setdefault(path, [])
        elif line.startswith("@@") and current is not None:
            current.append(Hunk())
        elif current and line.startswith("-"):
            current[-1].removed.append(line[1:])
        elif current and line.startswith("+"):
            current[-1].added.append(line[1:])
    return files


def _kept(hunk: Hunk, repaired: set[str]) -> list[str]:
    fixed = [a.strip() in repaired for a in hunk.added]
    if not any(fixed):
        return hunk.removed + hunk.added
    kept = [a for a, f in zip(hunk.added, fixed, strict=True) if not f]
    if len(hunk.removed) == len(hunk.added):
        kept += [r for r, f in zip(hunk.removed, fixed, strict=True) if not f]
    return kept


_ROW_CLAUSE = re.compile(
    r"^(where|and|or|not|join|inner|left|right|full|cross|on|using|from|group|having|qualify|"
    r"union|except|intersect|limit|offset|distinct|select\s+distinct|with)\b",
    re.IGNORECASE,
)
_DEFINES = re.compile(r"\bas\s+\"?([A-Za-z_][A-Za-z0-9_]*)\"?\s*,?$", re.IGNORECASE)
_BARE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)?\"?([A-Za-z_][A-Za-z0-9_]*)\"?\s*,?$")


def line_columns(text: str, by_lower: dict[str, str]) -> set[str] | None:
    """Output columns one changed SQL line may change; None for all of them (see above)."""
    if _ROW_CLAUSE.match(text):
        return None
    for pattern in (_DEFINES, _BARE):
        match = pattern.search(text)
        if match and match.group(1).lower() in by_lower:
            return {by_lower[match.group(1).lower()]}
    named = {by_lower[t.lower()] for t in _IDENT.findall(text) if t.lower() in by_lower}
    return named or None


@dataclass
class Meant:
    """The breaking diff's kept and repaired lines, per repo-relative file."""

    kept: dict[str, list[str]] = field(default_factory=dict)
    repaired: dict[str, list[str]] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # old path -> new path (git's -M)
    removed: dict[str, list[str]] = field(default_factory=dict)  # the diff's removed lines
    patched: dict[str, list[str]] = field(default_factory=dict)  # lines the candidate adds

    def files(self) -> list[str]:
        return sorted(set(self.kept) | set(self.repaired))

    def columns(self, path: str, output_columns: set[str]) -> list[str]:
        """Output columns of the relation built from `path` that may differ; [ALL] for all;
        [] when the file is not in the breaking diff or only repaired lines changed."""
        by_lower = {c.lower(): c for c in output_columns}
        found: set[str] = set()
        for line in self.kept.get(path, []):
            text = _COMMENT.sub("", line).strip()
            if not text:
                continue
            cols = line_columns(text, by_lower)
            if cols is None:
                return [ALL]
            found |= cols
        return sorted(found)

    def names_anywhere(self, name: str) -> bool:
        """An Airflow output name (XCom key, file name) appears in a kept line of any file."""
        needle = name.lower()
        return any(needle in line.lower() for lines in self.kept.values() for line in lines)

    def carried_forward(self, name: str) -> bool:
        """A name the breaking change introduced (in no line it removed) on a line the
        candidate repaired, that a line of the candidate still names."""
        needle = name.lower()

        def named(lines: dict[str, list[str]]) -> bool:
            return any(needle in line.lower() for found in lines.values() for line in found)

        return named(self.repaired) and named(self.patched) and not named(self.removed)

    def renames_column(self, old: str, new: str) -> bool:
        """The change wrote `new` (a kept line) where it took `old` away (a removed line), both
        as whole names: a column it renamed, wherever it is carried on (a `select *`)."""

        def named(name: str, lines: dict[str, list[str]]) -> bool:
            word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])", re.IGNORECASE)
            texts = (_COMMENT.sub("", ln) for found in lines.values() for ln in found)
            return any(word.search(text) for text in texts)

        return named(new, self.kept) and named(old, self.removed)

    def returns_changed(self) -> bool:
        return any(
            re.search(r"\breturn\b", _COMMENT.sub("", line))
            for lines in self.kept.values()
            for line in lines
        )


def patch_removed_lines(candidate_root: Path) -> dict[str, set[str]]:
    """Lines of the failing commit that the candidate's (uncommitted) patch removes, per file."""
    out = run_git(candidate_root, *_DIFF, "HEAD", timeout_s=QUERY_TIMEOUT_S)
    return {
        path: {r.strip() for h in hunks for r in h.removed if r.strip()}
        for path, hunks in parse_diff(out).items()
    }


def patch_added_lines(candidate_root: Path) -> dict[str, list[str]]:
    """Lines the candidate's (uncommitted) patch adds to the failing commit, per file."""
    out = run_git(candidate_root, *_DIFF, "HEAD", timeout_s=QUERY_TIMEOUT_S)
    return {path: [a for h in hunks for a in h.added] for path, hunks in parse_diff(out).items()}


def breaking_diff(
    repo: Path,
    baseline: str,
    failing: str,
    removed_by_patch: dict[str, set[str]],
    added_by_patch: dict[str, list[str]] | None = None,
) -> Meant:
    """Split `git diff baseline..failing` (read-only, in the user's repo) into kept/repaired."""
    out = run_git(repo, *_DIFF, baseline, failing, timeout_s=QUERY_TIMEOUT_S)
    meant = Meant()
    for path, hunks in parse_diff(out).items():
        punctuated = {_unpunctuated(a) for a in (added_by_patch or {}).get(path, [])}
        repaired_text = {
            r for r in removed_by_patch.get(path, set()) if _unpunctuated(r) not in punctuated
        }
        kept: list[str] = []
        for hunk in hunks:
            kept += _kept(hunk, repaired_text)
        meant.kept[path] = kept
        meant.repaired[path] = [a for h in hunks for a in h.added if a.strip() in repaired_text]
        meant.removed[path] = [r for h in hunks for r in h.removed]
    meant.patched = dict(added_by_patch or {})
    _read_renames(repo, baseline, failing, removed_by_patch, meant)
    return meant


def _unpunctuated(line: str) -> str:
    """A line without its trailing comma: a patch that only adds or drops it repaired nothing
    the line means."""
    return line.strip().rstrip(",").rstrip()


def _read_renames(
    repo: Path, baseline: str, failing: str, removed_by_patch: dict[str, set[str]], meant: Meant
) -> None:
    """Files the change renamed (git's rename detection): the data check compares the
    renamed model's relation with the old one's, so what the change meant in the renamed
    file is its diff against the old file, not the whole file as added."""
    status = run_git(repo, "diff", "-M", "--name-status", "--no-color", baseline, failing,
                     timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
    for line in status.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0].startswith("R"):
            continue
        old, new = parts[1], parts[2]
        meant.renamed[old] = new
        out = run_git(repo, *_DIFF, f"{baseline}:{old}", f"{failing}:{new}",
                      timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
        hunks = [h for part in parse_diff(out).values() for h in part]
        repaired_text = removed_by_patch.get(new, set())
        meant.kept[new] = [k for h in hunks for k in _kept(h, repaired_text)]
        meant.repaired[new] = [a for h in hunks for a in h.added if a.strip() in repaired_text]
        meant.removed[new] = [r for h in hunks for r in h.removed]
        meant.kept.pop(old, None)
        meant.removed.pop(old, None)
