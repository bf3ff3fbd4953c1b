"""Complete new YAML: the closing quote a rewritten value left out.

A commit edits a description in a properties file, `description: "Nilai nominal pembayaran"`
becomes `description: "Nilai nominal pembayaran (IDR)` with the closing quote forgotten, and
dbt cannot read the file (`Error reading shop: marts/schema.yml - Runtime Error`; the YAML
parser reads the value on into the lines below). A partial revert puts the old description
back and passes, undoing the edit (found on the public yurizza/classicmodels-dbt-duckdb, called
`fixed`). The fix is the quote, and the new text stays.

The quote goes at the end of a value on a line the change wrote when that line opens a quoted
value it does not close, holds no ` #` (text or a comment: which the author meant is not
known), and with the quote the whole file parses; exactly one such line, or no candidate.
"""

from __future__ import annotations

import io
import re
from typing import ClassVar

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from patchit.evidence.model import Evidence
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._change import file_change, rewrite_candidate

_YAML = (".yml", ".yaml")
# `key: "value` or `- "value`: the value's opening quote, what follows it, a comment
_OPEN = re.compile(r"^(?P<head>\s*(?:-\s+)?(?:[^\s#'\"][^#]*?:\s+)?)(?P<q>[\"'])(?P<body>.*)$")


def _parses(text: str) -> bool:
    try:
        YAML(typ="rt").load(io.StringIO(text))
    except (YAMLError, ValueError, RecursionError):
        return False
    return True


def _closed(line: str) -> str | None:
    """`line` with its quoted value closed, or None when the line does not open one that it
    leaves open."""
    found = _OPEN.match(line.rstrip("\r\n"))
    if found is None:
        return None
    quote, body = found.group("q"), found.group("body")
    inner = body.replace("\\\\", "").replace('\\"', "") if quote == '"' else body.replace("''", "")
    if quote in inner:
        return None  # it closes (or holds a second quoted part): not one left open
    if re.search(r"\s#", body):
        return None  # the text or a comment after it: which the author meant is not known
    value = body.rstrip()
    if not value:
        return None
    ending = line[len(line.rstrip("\r\n")) :]
    return f"{found.group('head')}{quote}{value}{quote}{ending}"


class CloseYamlQuoteStrategy(FixIt):
    """Close the quoted YAML value the change left open, keeping its new text."""

    name: ClassVar[str] = "dbt_close_yaml_quote"
    tag: ClassVar[str] = "close_yaml_quote"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        path = evidence.event.unit_path or evidence.unit_path
        if not path or not path.endswith(_YAML):
            return []
        change = file_change(evidence, path)
        if change is None:
            return []
        text, wrote = change.now, change.written
        if _parses(text):
            return []  # it parses: what dbt refused is something else
        lines = text.splitlines(keepends=True)
        found: list[tuple[int, str]] = []
        for number in sorted(wrote):
            if number > len(lines) or (fixed_line := _closed(lines[number - 1])) is None:
                continue
            after = "".join([*lines[: number - 1], fixed_line, *lines[number:]])
            if _parses(after):
                found.append((number - 1, after))
        if len(found) != 1:
            return []  # none, or more than one way to read the file: not a slip to guess
        start, after = found[0]
        why = (
            f"the change wrote {path}:{start + 1} `{lines[start].strip()}` without the quote "
            "that closes the value, so the file does not parse: closed it, the new text kept"
        )
        return rewrite_candidate(self, change, after, why, 0.8)
