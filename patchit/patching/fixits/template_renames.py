"""Follow a rename of columns a Jinja loop generates to the consumers' loops, in one candidate.

A mart pivots payments with `{% for m in methods %} ... as {{ m }}_amount {% endfor %}`; a
commit renames the generated columns to `{{ m }}_paid`. A downstream model whose own loop
builds `{{ m }}_amount` fails on the first expansion (`Referenced column "credit_card_amount"
not found`). The fix is in the consumer's template, not in one expanded name: its
`{{ ... }}_amount` reads `{{ ... }}_paid` (or `{{ ... }}_paid as {{ ... }}_amount` where it
is a whole select item, so the consumer's own outputs keep their names).

The rename is read from the model's text before and after the change (`template_renames`):
the only output alias glued to a Jinja expression that is gone, and the only new one glued to
the same expression. sqlglot cannot see through the loop, so the consumer is read with
care instead: it must `ref` the renamed model and nothing else (no other relation could
answer the name), and the expanded name in the message must be one the old template makes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from patchit.errors import VcsError
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import (
    error_text,
    model_files,
    project_files,
    read_repo_file,
)
from patchit.patching.fixits.follow_rename import missing_column
from patchit.patching.renames import changed_texts
from patchit.patching.revert import change_base
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git

_EXPR = r"\{\{-?\s*(?P<var>\w+)\s*-?\}\}"
_ALIAS = re.compile(rf"\bas\s+(?P<name>{_EXPR}(?P<suffix>\w+))", re.IGNORECASE)
_RELATIONS = re.compile(r"\{\{-?\s*(?:ref|source)\(\s*['\"](?P<name>\w+)['\"]")


@dataclass(frozen=True)
class TemplateRename:
    """Model `model` (file `path`) outputs `{{ x }}<new>` where it output `{{ x }}<old>`."""

    model: str
    path: str
    old: str  # the literal part glued after the Jinja expression: "_amount"
    new: str  # "_paid"


def template_renames(before: str, after: str) -> list[tuple[str, str]]:
    """(old suffix, new suffix) of output aliases glued to one Jinja expression renamed."""

    def aliases(text: str) -> set[tuple[str, str]]:
        return {(m["var"], m["suffix"]) for m in _ALIAS.finditer(text)}

    was, now = aliases(before), aliases(after)
    gone, came = was - now, now - was
    found = []
    for var in sorted({v for v, _ in gone}):
        olds = [s for v, s in gone if v == var]
        news = [s for v, s in came if v == var]
        if len(olds) == 1 and len(news) == 1 and not _named(after, olds[0]):
            found.append((olds[0], news[0]))
    return found


def _named(text: str, suffix: str) -> bool:
    return bool(re.search(rf"\}}\}}{re.escape(suffix)}\b", text))


def follow_template(text: str, old: str, new: str) -> str:
    """`text` with every `{{ x }}<old>` it reads reading `{{ x }}<new>`; a whole select item
    keeps its name (`{{ x }}<new> as {{ x }}<old>`); an alias (`as {{ x }}<old>`, the
    consumer's own output) is left as it is."""
    glued = re.compile(rf"(?P<expr>{_EXPR}){re.escape(old)}\b")

    def one(match: re.Match[str]) -> str:
        head = re.sub(r"\{%.*?%\}", " ", text[: match.start()], flags=re.DOTALL)  # loops
        tail = re.sub(r"\{%.*?%\}", " ", text[match.end() :], flags=re.DOTALL)
        if re.search(r"\bas\s*$", head, re.IGNORECASE):
            return match.group(0)
        whole = re.search(r"(?:\A|,|\bselect)\s*$", head, re.IGNORECASE) and re.match(
            r"\s*(?:,|$|\bfrom\b)", tail, re.IGNORECASE
        )
        if whole:
            return f"{match['expr']}{new} as {match['expr']}{old}"
        return f"{match['expr']}{new}"

    return glued.sub(one, text)


def breaking_template_renames(evidence: Evidence) -> list[TemplateRename]:
    event = evidence.event
    repo = Path(event.repo_path or evidence.repo_root)
    failing = event.commit or "HEAD"
    try:
        found = change_base(repo, failing, evidence.last_good_commit)
        if found is None:
            return []
        head = run_git(repo, "rev-parse", "--verify", "--quiet", f"{failing}^{{commit}}",
                       timeout_s=QUERY_TIMEOUT_S).strip()  # fmt: skip
        files = changed_texts(repo, found[0], head)
    except VcsError:
        return []
    models = {path: name for name, path in model_files(evidence).items() if path.endswith(".sql")}
    return [
        TemplateRename(models[f.path], f.path, old, new)
        for f in files
        if f.path in models and f.before is not None and f.after is not None
        for old, new in template_renames(f.before, f.after)
    ]


class FollowTemplateRenameStrategy(FixIt):
    """Follow a rename of loop-generated columns into the consumers' own loops."""

    name: ClassVar[str] = "dbt_follow_template_rename"
    tag: ClassVar[str] = "follow_template_rename"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        column = missing_column(error_text(evidence))
        if column is None:
            return []
        renames = [r for r in breaking_template_renames(evidence)
                   if column.endswith(r.old.lower()) and len(column) > len(r.old)]  # fmt: skip
        if len(renames) != 1:
            return []
        rename = renames[0]
        edits = []
        for path in project_files(evidence, (".sql",)):
            text = read_repo_file(evidence, path)
            if path == rename.path or text is None or not _named(text, rename.old):
                continue
            relations = {m["name"].lower() for m in _RELATIONS.finditer(text)}
            if relations != {rename.model.lower()}:
                return []  # another relation might answer the name: not read with confidence
            after = follow_template(text, rename.old, rename.new)
            if after != text:
                edits.append(derive_edit(path, text, after))
        if not edits:
            return []
        files = ", ".join(e.path for e in edits)
        why = (
            f"the breaking change renamed {rename.model}'s loop-generated columns "
            f"{{{{ ... }}}}{rename.old} to {{{{ ... }}}}{rename.new} ({rename.path}); the "
            f"consumers' loops follow the rename instead of undoing it ({files})"
        )
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=edits,
                rationale=why,
                confidence=0.85,
                follows={rename.old: rename.new},
            )
        ]
