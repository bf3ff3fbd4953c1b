"""The breaking change's intents: what its author meant, read from the diff through parsers.

A candidate that turns the run green by undoing what the author meant is not a fix ("Heal the
change, not the node" in the design). This module reads the change from the project's last
good commit (when it is an ancestor of the failing commit, else the failing commit's parent)
to the failing commit into typed `Intent`s:

- files (git's own rename detection): a file deleted, renamed or moved; a renamed model;
- macros: a Jinja macro defined before and nowhere after, paired with a new one;
- SQL (`intents_sql`, sqlglot): columns and CTEs renamed, added or removed, joins added,
  types and literals changed;
- YAML (`intents_other`, ruamel): a properties file's models and columns renamed, added,
  removed;
- Python (`intents_other`, `ast`): tasks added, parameters renamed, module constants changed,
  Airflow 2 idioms introduced.

Slips are not intents: whitespace, a file that does not parse after the change (a dropped
comma, a lost indent), a rename by one stray character (a typo of a name that was there).

`change_intents(evidence)` reads them once per change (cached); `reverted_intents` judges a
candidate's edited texts against them; `revert_label` is the label a reviewer reads. Git runs
through the read-only queries of `patchit.sandbox.git`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from patchit.errors import VcsError
from patchit.evidence.gitlog import breaking_base, resolve_commit
from patchit.evidence.intents_other import (
    OtherIntent,
    python_holds,
    python_intents,
    yaml_holds,
    yaml_intents,
)
from patchit.evidence.intents_sql import SqlIntent, shown_name, sql_holds, sql_intents
from patchit.evidence.model import Evidence
from patchit.evidence.name_renames import (
    docs_blocks,
    docs_renames,
    jinja_set_renames,
    jinja_sets,
    project_vars,
    var_renames,
)
from patchit.memory.records import REVERTS
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git, show_file

IntentKind = Literal[
    "column_renamed", "column_added", "column_removed", "cte_added", "cte_renamed",
    "join_added", "type_changed", "literal_changed", "model_renamed", "macro_renamed",
    "file_renamed", "file_moved", "file_deleted", "task_added", "parameter_renamed",
    "function_renamed", "key_renamed", "docs_renamed", "var_renamed", "jinja_var_renamed",
    "airflow2_idiom",
]  # fmt: skip
MAX_FILES = 200
MAX_FILE_CHARS = 200_000
_SECRET = re.compile(r"(^|/)(\.env[^/]*|[^/]*\.env|[^/]*secret[^/]*|[^/]*credential[^/]*|"
                     r"profiles\.ya?ml)$", re.I)  # fmt: skip
_MACRO = re.compile(r"{%-?\s*macro\s+([A-Za-z_]\w*)\s*\(")
_SQL, _YAML, _PY = (".sql",), (".yml", ".yaml"), (".py",)
_RENAMES = {"column_renamed", "cte_renamed", "model_renamed", "macro_renamed", "file_renamed",
            "parameter_renamed", "function_renamed", "key_renamed", "docs_renamed",
            "var_renamed", "jinja_var_renamed"}  # fmt: skip


class Intent(BaseModel):
    """One thing the breaking change meant to do, and the words a reviewer reads for it."""

    model_config = ConfigDict(extra="forbid")

    kind: IntentKind
    path: str = Field(description="the file, relative to the repository root")
    old: str = ""
    new: str = ""
    description: str = Field(description="one line: 'renamed column a to b in stg_x'")
    scope: str = Field(default="", description="the CTE, model or function it is in")
    place: str = Field(default="", description="a literal's column, or where/having")
    old_path: str = Field(default="", description="a renamed or moved file's old path")
    was: str = Field(default="", exclude=True, description="a literal's place, before")


def one_slip(old: str, new: str) -> bool:
    """`new` is `old` with one stray character: inserted, dropped, replaced or swapped."""
    if old == new or abs(len(old) - len(new)) > 1:
        return False
    if len(old) == len(new):
        diffs = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
        swapped = len(diffs) == 2 and diffs[1] == diffs[0] + 1 and (
            old[diffs[0]] == new[diffs[1]] and old[diffs[1]] == new[diffs[0]])  # fmt: skip
        return len(diffs) == 1 or swapped
    short, long = sorted((old, new), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


# -- reading one file's change --------------------------------------------------------------


def _name(path: str) -> str:
    return PurePosixPath(path).stem


def _describe(kind: str, path: str, old: str, new: str, scope: str, place: str) -> str:
    model = _name(path)
    where = f"{model} (CTE {scope})" if scope and path.endswith(_SQL) else model
    texts = {
        "column_renamed": f"renamed column {old} to {new} in {where}",
        "column_added": f"added column {new} to {where}",
        "column_removed": f"removed column {old} from {where}",
        "cte_added": f"added CTE {new} to {model}",
        "cte_renamed": f"renamed CTE {old} to {new} in {model}",
        "join_added": f"joined {place} as {new} in {where}",
        "type_changed": f"changed the type of {place} in {where} from {old} to {new}"
        if old and new
        else f"cast {place} in {where} to {new}"
        if new
        else f"took the cast to {old} off {place} in {where}",
        "literal_changed": f"changed {old} to {new} in {place} of {where}",
        "model_renamed": f"renamed model {old} to {new}",
        "macro_renamed": f"renamed macro {old} to {new}",
        "docs_renamed": f"renamed docs block {old} to {new}",
        "var_renamed": f"renamed project var {old} to {new}",
        "jinja_var_renamed": f"renamed Jinja variable {old} to {new} in {model}",
        "file_renamed": f"renamed file {old} to {new}",
        "file_moved": f"moved {old} to {new}",
        "file_deleted": f"deleted file {path}",
        "task_added": f"added task {new} to {path}",
        "parameter_renamed": f"renamed parameter {old} of {scope} to {new} in {path}",
        "function_renamed": f"renamed function {old} to {new} in {path}",
        "key_renamed": f"renamed key {old!r} to {new!r} in {scope} ({path})",
        "airflow2_idiom": f"introduced the Airflow 2 idiom {new} in {path}",
    }
    if path.endswith(_YAML) and kind == "model_renamed":  # beside its file's rename
        return f"renamed model {old} to {new} in the properties file {path}"
    if path.endswith(_YAML) and kind.startswith("column_"):
        return texts[kind].replace(f" {model}", f" the properties of {scope}")
    if kind == "literal_changed" and path.endswith(_PY):
        return f"changed {scope} from {old} to {new} in {path}"
    return texts[kind]


def _intent(kind: str, path: str, found: SqlIntent | OtherIntent) -> Intent:
    place = found.place if isinstance(found, SqlIntent) else ""
    was = found.was if isinstance(found, SqlIntent) else ""
    return Intent(
        kind=kind,  # type: ignore[arg-type]  # the parsers speak IntentKind's words
        path=path,
        old=found.old,
        new=found.new,
        scope=found.scope,
        place=place,
        was=was,
        description=_describe(kind, path, found.old, found.new, found.scope, place),
    )


def file_intents(path: str, before: str, after: str) -> list[Intent]:
    """The intents of one file changed in place (slips left out)."""
    found: list[SqlIntent | OtherIntent] = []
    if path.endswith(_SQL):
        found = list(sql_intents(before, after))
    elif path.endswith(_YAML):
        found = list(yaml_intents(before, after))
    elif path.endswith(_PY):
        found = list(python_intents(before, after))
    kept = [_intent(f.kind, path, f) for f in found
            if not (f.kind in _RENAMES and one_slip(f.old, f.new))]  # fmt: skip
    for intent in kept:  # described as written: `{{ m }}_amount`, not its placeholder
        old, new = shown_name(intent.old, before), shown_name(intent.new, after)
        if (old, new) != (intent.old, intent.new):
            intent.description = _describe(intent.kind, path, old, new, intent.scope, intent.place)
    return kept


def macro_intents(changed: list[tuple[str, str | None, str | None]]) -> list[Intent]:
    """A macro defined before and nowhere after, and one defined after and nowhere before:
    renamed when each is the only one of its side (in one file, or in the whole change)."""
    before = {m: p for p, b, _ in changed if b for m in _MACRO.findall(b)}
    after = {m: p for p, _, a in changed if a for m in _MACRO.findall(a)}
    gone = [m for m in before if m not in after]
    new = [m for m in after if m not in before]
    pairs = []
    for old in gone:
        same_file = [n for n in new if after[n] == before[old]]
        if len(same_file) == 1:
            pairs.append((old, same_file[0]))
    if not pairs and len(gone) == 1 and len(new) == 1:
        pairs.append((gone[0], new[0]))
    return [
        Intent(kind="macro_renamed", path=after[n], old=o, new=n, old_path=before[o],
               description=_describe("macro_renamed", after[n], o, n, "", ""))
        for o, n in pairs if not one_slip(o, n)
    ]  # fmt: skip


def name_intents(changed: list[tuple[str, str | None, str | None]]) -> list[Intent]:
    """Docs blocks, project vars and Jinja variables renamed (`name_renames`)."""
    found = [
        Intent(kind="docs_renamed", path=path, old=o, new=n, old_path=old_path,
               description=_describe("docs_renamed", path, o, n, "", ""))
        for o, n, old_path, path in docs_renames(changed)
    ]  # fmt: skip
    found += [
        Intent(kind="var_renamed", path=path, old=o, new=n, old_path=path,
               description=_describe("var_renamed", path, o, n, "", ""))
        for o, n, path in var_renames(changed)
    ]  # fmt: skip
    found += [
        Intent(kind="jinja_var_renamed", path=path, old=o, new=n,
               description=_describe("jinja_var_renamed", path, o, n, "", ""))
        for o, n, path in jinja_set_renames(changed)
    ]  # fmt: skip
    return [i for i in found if not one_slip(i.old, i.new)]


def read_intents(
    changed: list[tuple[str, str | None, str | None]], renamed: list[tuple[str, str]]
) -> list[Intent]:
    """Intents of a change given as (path, text before or None, text after or None) and the
    (old path, new path) renames git found; a renamed file's path is its new one."""
    found: list[Intent] = []
    for old_path, new_path in renamed:
        moved = PurePosixPath(old_path).parent != PurePosixPath(new_path).parent
        old, new = _name(old_path), _name(new_path)
        if old != new and one_slip(old, new):
            continue
        kind = "file_moved" if moved and old == new else (
            "model_renamed" if new_path.endswith(_SQL) else "file_renamed")  # fmt: skip
        shown = (old_path, new_path) if kind != "model_renamed" else (old, new)
        found.append(Intent(kind=kind, path=new_path, old=shown[0], new=shown[1],  # type: ignore[arg-type]
                            old_path=old_path,
                            description=_describe(kind, new_path, *shown, "", "")))  # fmt: skip
    for path, before, after in changed:
        if before is not None and after is None:
            text = _describe("file_deleted", path, "", "", "", "")
            found.append(Intent(kind="file_deleted", path=path, description=text))
        elif before is not None and after is not None and before != after:
            found += file_intents(path, before, after)
    return found + macro_intents(changed) + name_intents(changed)


# -- reading the change from git ------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return run_git(repo, *args, timeout_s=QUERY_TIMEOUT_S)


def _text_at(repo: Path, commit: str, path: str) -> str | None:
    """`path`'s text at `commit`; None when absent, too large, or not text: a change that also
    commits a binary file (a DuckDB file, an ERD image, a Latin-1 seed) has no intent in it."""
    text = show_file(repo, commit, path)
    return None if text is None or "\x00" in text or len(text) > MAX_FILE_CHARS else text


def _commit(repo: Path, rev: str) -> str | None:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip() or None
    except VcsError:
        return None


def breaking_range(repo: Path, failing: str, last_good: str | None) -> tuple[str, str] | None:
    """(base, failing) full ids: `breaking_base`'s base, and the failing commit."""
    found, head = breaking_base(repo, failing, last_good), resolve_commit(repo, failing)
    return (found[0], head) if found and head else None


@lru_cache(maxsize=32)
def _intents_between(repo: str, base: str, head: str) -> tuple[Intent, ...]:
    root = Path(repo)
    out = _git(root, "diff", "--name-status", "-M", base, head)
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line][:MAX_FILES]
    changed: list[tuple[str, str | None, str | None]] = []
    renamed: list[tuple[str, str]] = []
    for row in rows:
        status, path = row[0], row[-1]
        if _SECRET.search(path):
            continue
        if status.startswith("R") and len(row) == 3:
            renamed.append((row[1], path))
            before = _text_at(root, base, row[1])
        else:
            before = None if status.startswith("A") else _text_at(root, base, path)
        after = None if status.startswith("D") else _text_at(root, head, path)
        changed.append((path, before, after))
    return tuple(read_intents(changed, renamed))


def change_intents(evidence: Evidence) -> list[Intent]:
    """The intents of the breaking change of this failure ([] when there is no change to
    read); read once per change."""
    event = evidence.event
    repo = Path(event.repo_path or evidence.repo_root)
    try:
        found = breaking_range(repo, event.commit or "HEAD", evidence.last_good_commit)
        if found is None:
            return []
        return list(_intents_between(str(repo.resolve()), *found))
    except VcsError:
        return []


# -- judging a candidate --------------------------------------------------------------------

_GUARDED = set(get_args(IntentKind)) - {"airflow2_idiom"}  # moving an idiom on is the fix


def _holds(intent: Intent, text: str) -> bool:
    if intent.path.endswith(_SQL):
        return sql_holds(SqlIntent(intent.kind, intent.old, intent.new, intent.scope,
                                   intent.place, intent.was), text)  # fmt: skip
    other = OtherIntent(intent.kind, intent.old, intent.new, intent.scope)
    if intent.path.endswith(_YAML):
        return yaml_holds(other, text)
    if intent.path.endswith(_PY):
        return python_holds(other, text)
    return True


def reverted_intents(intents: list[Intent], texts: dict[str, tuple[str, str]]) -> list[Intent]:
    """The intents a candidate undoes, from its edited files (path -> (text before, after)
    at the failing commit; before "" for a file the candidate creates)."""
    undone = []
    for intent in (i for i in intents if i.kind in _GUARDED):
        if intent.kind == "file_deleted":
            hit = intent.path in texts and texts[intent.path][0] == ""
        elif intent.kind in ("file_renamed", "file_moved", "model_renamed"):
            hit = intent.old_path in texts and texts[intent.old_path][0] == ""
        elif intent.kind == "macro_renamed":
            hit = any(re.search(rf"{{%-?\s*macro\s+{re.escape(intent.old)}\s*\(", after)
                      and not re.search(rf"{{%-?\s*macro\s+{re.escape(intent.old)}\s*\(", before)
                      for before, after in texts.values())  # fmt: skip
        elif intent.kind == "docs_renamed":
            hit = any(intent.old in docs_blocks(after) and intent.old not in docs_blocks(before)
                      for before, after in texts.values())  # fmt: skip
        elif intent.kind == "jinja_var_renamed":
            before, after = texts.get(intent.path, ("", ""))
            hit = intent.old in jinja_sets(after) and intent.old not in jinja_sets(before)
        elif intent.kind == "var_renamed":
            before, after = texts.get(intent.path, ("", ""))
            hit = intent.old in (project_vars(after) or {}) and intent.old not in (
                project_vars(before) or {})  # fmt: skip
        else:
            hit = intent.path in texts and not _holds(intent, texts[intent.path][1])
        if hit:
            undone.append(intent)
    return undone


def revert_label(undone: list[Intent]) -> str:
    """The label a reviewer reads: `reverts your change: <intent>` (two named at most)."""
    shown = [i.description for i in undone[:2]]
    more = f", and {len(undone) - 2} more" if len(undone) > 2 else ""
    return f"{REVERTS}: {' and '.join(shown)}{more}"
