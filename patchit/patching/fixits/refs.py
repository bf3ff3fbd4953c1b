"""ref()/source() to a node that does not exist, and a model that refs itself -> near name.

When the breaking change renamed the missing node's file (`stg_invoices.sql` ->
`stg_billing_invoices.sql`), the new name is the fix whatever its spelling, and every ref to
the old name in the project is followed to it, not only the one dbt reported.

The dbt 1.11 parse-time messages (no manifest exists for the failing commit):

    Model 'model.shop.orders' (models/marts/orders.sql) depends on a node named 'stg_order'
    which was not found
    Model 'model.shop.orders' (models/marts/orders.sql) depends on a source named
    'raw.orderz' which was not found
    Test '...' (models/marts/schema.yml) depends on a node named 'x' in package '' which
    was not found                                   (a warning: the test is dropped)
    Found a cycle: model.shop.customer_segments     (a model that refs itself)
"""

from __future__ import annotations

import re
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import (
    error_text,
    model_files,
    project_files,
    read_repo_file,
    scan_index,
    to_repo_path,
)
from patchit.patching.fixits.near_names import near_name_review
from patchit.patching.renames import Rename, breaking_renames

# the node's kind is a word or a few ("Model", "Semantic model"): bounded, so a long run of
# words and spaces is not re-read from every capital letter in it (quadratic: the fuzzing's hang)
_MISSING = re.compile(
    r"\b[A-Z]\w*(?: \w+){0,3} '(?P<uid>[^']+)' \((?P<path>[^)]+)\) depends on a "
    r"(?P<what>node|source) named '(?P<name>[^']+)'(?: in package '[^']*')?"
    r"(?: with version '[^']*')? which was not found"
)
_CYCLE = re.compile(r"Found a cycle: (?P<cycle>[^\n]+)")
_REF_ARG = r"(?P<pre>\bref\(\s*(?:['\"][\w.]+['\"]\s*,\s*)?['\"]){name}(?=['\"])"
_SOURCE_ARGS = r"(?P<pre>\bsource\(\s*['\"]){src}(?P<mid>['\"]\s*,\s*['\"]){tbl}(?=['\"])"
_NODE_SUFFIXES = (".sql", ".py", ".csv")  # models, seeds, snapshots
_REF_SUFFIXES = (".sql", ".py", ".yml", ".yaml")  # what can call ref(): models, tests, YAML
_REFS = re.compile(r"\bref\(\s*(?:['\"][\w.]+['\"]\s*,\s*)?['\"](?P<name>\w+)['\"]")


def _renamed_ref(text: str, old: str, new: str) -> str:
    pattern = re.compile(_REF_ARG.format(name=re.escape(old)))
    return pattern.sub(lambda m: m.group("pre") + new, text)


def _candidate(
    strategy: FixRefStrategy | SelfRefCycleStrategy,
    path: str,
    before: str,
    after: str,
    why: str,
    review: str = "",
) -> list[PatchCandidate]:
    if after == before:
        return []
    edit = derive_edit(path, before, after)
    return [
        PatchCandidate(
            strategy=strategy.name,
            tag=strategy.tag,
            tier=strategy.tier,
            edits=[edit],
            rationale=why,
            review=review,
        )
    ]


class FixRefStrategy(FixIt):
    """Point a ref()/source() naming a missing node at the one existing near name."""

    name: ClassVar[str] = "dbt_fix_ref"
    tag: ClassVar[str] = "fix_ref"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        found = _MISSING.search(error_text(evidence))
        if found is None:
            return []
        path = to_repo_path(evidence, found.group("path"))
        text = read_repo_file(evidence, path)
        if text is None:
            return []
        index = scan_index(evidence)
        missing = found.group("name")
        if found.group("what") == "node":
            own = found.group("uid").split(".")[-1]
            names = [n for n in (*index.models, *index.seeds, *index.snapshots) if n != own]
            if renamed := _renamed_node(evidence, missing, names):
                return self._follow(evidence, path, renamed)
            fix = nearest(missing, names)
            if fix is None:
                return []
            why = f"ref('{missing}') names no node; '{fix}' is the only near name in the project"
            review = near_name_review(evidence, [path], missing, fix, names, "model")
            return _candidate(self, path, text, _renamed_ref(text, missing, fix), why, review)
        if "." not in missing:
            return []
        fix = nearest(missing, [f"{s}.{t}" for s, t in index.sources])
        if fix is None:
            return []
        (src, tbl), (new_src, new_tbl) = missing.split(".", 1), fix.split(".", 1)
        pattern = re.compile(_SOURCE_ARGS.format(src=re.escape(src), tbl=re.escape(tbl)))
        after = pattern.sub(lambda m: f"{m.group('pre')}{new_src}{m.group('mid')}{new_tbl}", text)
        why = f"source('{src}', '{tbl}') is not declared; '{fix}' is the only near source table"
        reviews = [
            near_name_review(evidence, [path], old, new, {p[i] for p in index.sources}, "source")
            for i, (old, new) in enumerate(((src, new_src), (tbl, new_tbl)))
            if old != new
        ]
        return _candidate(self, path, text, after, why, "; ".join(r for r in reviews if r))

    def _follow(self, evidence: Evidence, failing: str, rename: Rename) -> list[PatchCandidate]:
        """ref('old') -> ref('new') in every project file that still refs the old name: the
        rename broke them all, and dbt names only the first it meets."""
        edits = []
        for rel in dict.fromkeys([failing, *project_files(evidence, _REF_SUFFIXES)]):
            text = read_repo_file(evidence, rel)
            if text is not None and rename.old in text:
                after = _renamed_ref(text, rename.old, rename.new)
                if after != text:
                    edits.append(derive_edit(rel, text, after))
        if not edits:
            return []
        files = ", ".join(e.path for e in edits)
        why = (
            f"the breaking change renamed {rename.old_path} to {rename.path}; "
            f"ref('{rename.old}') -> ref('{rename.new}') where it is still used ({files})"
        )
        return [PatchCandidate(strategy=self.name, tag=self.tag, tier=self.tier, edits=edits,
                               rationale=why, confidence=0.9,
                               follows={rename.old: rename.new})]  # fmt: skip


def _renamed_node(evidence: Evidence, missing: str, names: list[str]) -> Rename | None:
    """The file rename of the breaking change that took the missing node's name away, when
    the new name is a node of the project."""
    found = [
        r for r in breaking_renames(evidence)
        if r.kind == "file" and r.old == missing and r.new in names
        and r.path.endswith(_NODE_SUFFIXES)
    ]  # fmt: skip
    return found[0] if len(found) == 1 else None


class SelfRefCycleStrategy(FixIt):
    """A model that refs itself: point that ref at the one near-named node not downstream."""

    name: ClassVar[str] = "dbt_self_ref_cycle"
    tag: ClassVar[str] = "fix_ref"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        found = _CYCLE.search(error_text(evidence))
        if found is None:
            return []
        nodes = [n.strip() for n in found.group("cycle").split("-->")]
        if len(set(nodes)) != 1 or not nodes[0].startswith("model."):
            return []  # a cycle through several models has no single file to blame
        own = nodes[0].split(".")[-1]
        files = model_files(evidence)
        path = files.get(own)
        text = read_repo_file(evidence, path) if path else None
        if path is None or text is None or own not in _REFS.findall(text):
            return []
        # Any node downstream of this model would only make a longer cycle.
        children: dict[str, set[str]] = {}
        for name, rel in files.items():
            for parent in _REFS.findall(read_repo_file(evidence, rel) or ""):
                children.setdefault(parent, set()).add(name)
        downstream, todo = {own}, [own]
        while todo:
            for child in children.get(todo.pop(), set()) - downstream:
                downstream.add(child)
                todo.append(child)
        index = scan_index(evidence)
        names = [n for n in (*index.models, *index.seeds, *index.snapshots) if n not in downstream]
        fix = nearest(own, names)
        if fix is None:
            return []
        why = f"model '{own}' refs itself; '{fix}' is the only near-named node upstream of it"
        return _candidate(self, path, text, _renamed_ref(text, own, fix), why)
