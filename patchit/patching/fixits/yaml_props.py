"""An empty optional key in a properties YAML file (`data_tests:` with nothing under it).

dbt 1.11 rejects the file at parse time:

    Parsing Error
      Invalid models config given in models/marts/schema.yml @ models: {'name':
      'daily_revenue', 'columns': [{'name': 'order_date', 'data_tests': None}], ...} - at
      path ['columns'][0]['data_tests']: None is not of type 'array'

The fix removes the key's line. ruamel.yaml (round-trip) locates the key and checks the
result: the new text must parse to the old document minus that key, comments kept.
"""

from __future__ import annotations

import io
import re
from typing import ClassVar

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text, read_repo_file, to_repo_path

_INVALID = re.compile(
    r"Invalid (?P<key>\w+) config given in (?P<path>\S+) @ (?P=key): \{'name': '(?P<entry>[^']+)'"
    r".*? - at path (?P<at>(?:\[[^\]]+\])*): None is not of type '\w+'",
    re.DOTALL,
)
_STEP = re.compile(r"\[(?:'(?P<key>[^']+)'|(?P<index>\d+))\]")
# Keys dbt accepts absent; an empty `name:` is not ours to delete.
_OPTIONAL_KEYS = {
    "columns", "config", "constraints", "data_tests", "description", "docs", "meta", "tags",
    "tests",
}  # fmt: skip


def _load(text: str) -> object:
    return YAML(typ="rt").load(io.StringIO(text))


def _walk(doc: object, yaml_key: str, entry: str, steps: list[str | int]) -> object:
    """The mapping holding the last step's key, or None when the path does not lead there."""
    if not isinstance(doc, CommentedMap) or not isinstance(doc.get(yaml_key), CommentedSeq):
        return None
    node: object = next(
        (e for e in doc[yaml_key] if isinstance(e, CommentedMap) and e.get("name") == entry), None
    )
    for step in steps[:-1]:
        in_seq = isinstance(step, int) and isinstance(node, CommentedSeq) and step < len(node)
        in_map = isinstance(step, str) and isinstance(node, CommentedMap) and step in node
        if not (in_seq or in_map):
            return None
        node = node[step]  # type: ignore[index]
    return node


class FixYamlStrategy(FixIt):
    """Remove an empty optional key that makes dbt reject a properties file."""

    name: ClassVar[str] = "dbt_fix_yaml"
    tag: ClassVar[str] = "fix_yaml"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        found = _INVALID.search(error_text(evidence))
        if found is None:
            return []
        steps: list[str | int] = [
            int(m.group("index")) if m.group("index") else m.group("key")
            for m in _STEP.finditer(found.group("at"))
        ]
        if not steps or not isinstance(steps[-1], str) or steps[-1] not in _OPTIONAL_KEYS:
            return []
        key, path = steps[-1], to_repo_path(evidence, found.group("path"))
        text = read_repo_file(evidence, path)
        if text is None:
            return []
        try:
            parent = _walk(_load(text), found.group("key"), found.group("entry"), steps)
        except YAMLError:
            return []
        if not isinstance(parent, CommentedMap) or key not in parent or parent[key] is not None:
            return []
        line_no = parent.lc.key(key)[0]
        lines = text.splitlines(keepends=True)
        if not re.fullmatch(rf"\s*{re.escape(key)}\s*:\s*(~|null)?\s*(#.*)?\s*", lines[line_no]):
            return []  # the key shares its line ("- data_tests:", flow style): not a line edit
        after = "".join(lines[:line_no] + lines[line_no + 1 :])
        if not self._only_key_removed(text, after, found.group("key"), found.group("entry"), steps):
            return []
        why = f"empty '{key}:' in {path} is rejected by dbt (None is not a list); removed it"
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=[derive_edit(path, text, after)],
                rationale=why,
            )
        ]

    def _only_key_removed(
        self, before: str, after: str, yaml_key: str, entry: str, steps: list[str | int]
    ) -> bool:
        try:
            old, new = _load(before), _load(after)
        except YAMLError:
            return False
        parent = _walk(old, yaml_key, entry, steps)
        if not isinstance(parent, CommentedMap):
            return False
        del parent[steps[-1]]
        return bool(old == new)
