"""Follow a column rename of the breaking change to every consumer, in one candidate.

A commit renames `status` to `order_status` in a staging model (`status as order_status`);
the models, tests and YAML that read `status` fail one by one (DuckDB: `Referenced column
"status" not found`, `Table "o" does not have a column named "status"`; Postgres: `column
"status" does not exist`). Reverting the rename turns the run green but undoes what the
author meant. This fix-it completes the change instead: the rename is read from the diff
(`column_renames`), and one candidate edits every consumer of that model, found by `ref`:
its SQL models and tests (`rename_sites`: `new` where they read the column, `new as old`
where a select item must keep its output name, so nothing downstream changes), the model's
YAML `columns:` entry and the `relationships` tests pointing at the column (`rename_yaml`).

A consumer whose output `*` passes the renamed column on (jaffle-shop's `orders` selects
`orders.*` from `stg_orders`) now outputs the new name itself: its own references are
followed, and so is the rename onward, into its consumers (`customers` reading
`orders.order_total`) and its YAML (a test on `orders` naming the old column), in the same
candidate, through at most `MAX_PASS_THROUGH` such models.

One candidate or none: a consumer it cannot read with confidence (see `rename_sites`), or a
Python model that names the old column, makes it propose nothing. The candidate declares the
renames it follows (`PatchCandidate.follows`), so the policy counts them as one edit kind
and caps the sites by `[policy] max_rename_sites`.
"""

from __future__ import annotations

import re
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edits
from patchit.patching.base import Edit, FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import (
    error_text,
    model_files,
    project_files,
    read_repo_file,
)
from patchit.patching.fixits._sqlscope import Columns
from patchit.patching.fixits.column_renames import ColumnRename, breaking_column_renames, outputs
from patchit.patching.fixits.rename_sites import Refusal, follow_in_sql, passed_on
from patchit.patching.fixits.rename_yaml import follow_in_yaml

_MISSING = [
    re.compile(r'Referenced column "(?P<col>[^"]+)" not found'),
    re.compile(r'(?:Table|Values list) "[^"]+" does not have a column named "(?P<col>[^"]+)"'),
    re.compile(r'column "(?P<col>[^".]+)" does not exist'),
    re.compile(r'column [^\s".]+\.(?P<col>[^\s".]+) does not exist'),
    # DuckDB, when the missing name is also an alias of the same select (`sum(x) as x`)
    re.compile(r'Column "(?P<col>[^"]+)" referenced that exists in the SELECT clause'),
]


# how many star-selecting models a rename is followed through (jaffle-shop: one, `orders`)
MAX_PASS_THROUGH = 8


def missing_column(message: str) -> str | None:
    """The column the error says the SQL reads but no relation has (lower case)."""
    for pattern in _MISSING:
        if found := pattern.search(message):
            return found.group("col").lower()
    return None


def _refs(model: str) -> re.Pattern[str]:
    return re.compile(rf"""\bref\(\s*['"]{re.escape(model)}['"]\s*\)""", re.IGNORECASE)


class FollowColumnRenameStrategy(FixIt):
    """Follow the change's column rename to every consumer of the renamed model."""

    name: ClassVar[str] = "dbt_follow_column_rename"
    tag: ClassVar[str] = "follow_column_rename"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        column = missing_column(error_text(evidence))
        if column is None:
            return []
        renames = breaking_column_renames(evidence)
        models = {r.model.lower() for r in renames if r.old == column}
        if len(models) > 1:
            models &= _models_read(evidence)
        if len(models) != 1:
            return []
        model = models.pop()
        followed = [r for r in renames if r.model.lower() == model]
        found = self._followed(evidence, followed)
        if found is None or not found[0]:
            return []
        texts, passed = found
        related = {model, *passed, *(p for p in texts)}
        if not ({evidence.unit_path, (evidence.tested_model or "").lower()} & related
                or {model, *passed} & _models_read(evidence)):  # fmt: skip
            return []
        edits: list[Edit] = []
        for path, (before, after) in sorted(texts.items()):
            edits += derive_edits(path, before, after)
        shown = ", ".join(f"{r.old} -> {r.new}" for r in followed)
        sql = sum(1 for p in texts if p.endswith(".sql"))
        through = (f"; it reaches their consumers under the new name through "
                   f"{', '.join(passed)}'s `*`, so it was followed there too"
                   if passed else "")  # fmt: skip
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=edits,
                rationale=(
                    f"the change renamed {followed[0].model}'s column {shown} "
                    f"({followed[0].path}); followed the rename to every consumer instead of "
                    f"undoing it: {sql} SQL file(s) read the new name (under the old one where "
                    f"a select item keeps its output name), {len(texts) - sql} YAML file(s) "
                    f"({', '.join(sorted(texts))}){through}"
                ),
                confidence=0.9,
                follows={r.old: r.new for r in followed},
            )
        ]

    def _followed(
        self, evidence: Evidence, followed: list[ColumnRename]
    ) -> tuple[dict[str, tuple[str, str]], list[str]] | None:
        """({path: (text, followed text)} of every file that changes, the models the rename
        passed through); None: refused."""
        first = followed[0]
        names = {path: name.lower() for name, path in model_files(evidence).items()}
        known: dict[str, set[str]] = {first.model.lower(): set(first.before)}
        queue = [(first.model.lower(), {r.old: r.new for r in followed})]
        passed: list[str] = []
        paths = [p for p in project_files(evidence, (".sql", ".py", ".yml", ".yaml"))
                 if p != first.path]  # fmt: skip
        original: dict[str, str] = {}
        current: dict[str, str] = {}
        while queue:
            model, renames = queue.pop(0)
            columns = _columns(evidence, known)
            refs = _refs(model)
            for path in paths:
                if path not in current:
                    read = read_repo_file(evidence, path)
                    if read is None:
                        continue
                    original[path] = current[path] = read
                text = current[path]
                result: str | Refusal
                if path.endswith(".py"):
                    named = any(re.search(rf"\b{re.escape(o)}\b", text) for o in renames)
                    result = (Refusal("a Python model reads it") if refs.search(text) and named
                              else text)  # fmt: skip
                elif path.endswith(".sql"):
                    if not refs.search(text):
                        continue
                    through = passed_on(text, model, renames, columns)
                    onward = names.get(path)
                    if through and onward is not None and onward not in known:
                        if len(passed) >= MAX_PASS_THROUGH:
                            return None
                        passed.append(onward)  # its `*` passes the new name on: follow it
                        known[onward] = set(through)  # what its consumers read of it
                        queue.append((onward, {o: n for o, n in renames.items()
                                               if o.lower() in through}))  # fmt: skip
                    else:
                        through = set()
                    result = follow_in_sql(text, model, renames, columns, frozenset(through))
                else:
                    result = follow_in_yaml(text, model, renames)
                if isinstance(result, Refusal):
                    return None
                current[path] = result
        out = {p: (original[p], t) for p, t in current.items() if t != original[p]}
        return out, passed


def _models_read(evidence: Evidence) -> set[str]:
    """The models the failing unit reads (its upstream relations, the model a test tests)."""
    found = {r.name.lower() for r in evidence.upstream}
    if evidence.tested_model:
        found.add(evidence.tested_model.lower())
    return found


def _columns(evidence: Evidence, known: dict[str, set[str]]) -> Columns:
    """A relation's column names: `known`'s (the renamed model's before the change, the
    models the rename passed through: at least the old names they passed on); others from
    the warehouse snapshot, their model file's select list, or their seed's header."""
    upstream = {r.name.lower(): {c.lower() for c in r.columns} for r in evidence.upstream}
    files = {name.lower(): path for name, path in model_files(evidence).items()}
    seeds = {p.rsplit("/", 1)[-1][: -len(".csv")].lower(): p
             for p in project_files(evidence, (".csv",))}  # fmt: skip
    cache: dict[str, set[str] | None] = {}

    def columns(name: str) -> set[str] | None:
        if name in known:
            return set(known[name])
        if name not in cache:
            cache[name] = _lookup(evidence, name, upstream, files, seeds)
        return cache[name]

    return columns


def _lookup(
    evidence: Evidence,
    name: str,
    upstream: dict[str, set[str]],
    files: dict[str, str],
    seeds: dict[str, str],
) -> set[str] | None:
    if upstream.get(name):
        return upstream[name]
    if name in files and (text := read_repo_file(evidence, files[name])) is not None:
        found = outputs(text) if files[name].endswith(".sql") else None
        return set(found) if found is not None else None
    if name in seeds and (text := read_repo_file(evidence, seeds[name])) is not None:
        header = text.splitlines()[0] if text else ""
        return {c.strip().strip('"').lower() for c in header.split(",") if c.strip()}
    return None
