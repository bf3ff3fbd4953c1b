"""Where a YAML file breaks, as the YAML parser marks it, not as dbt words it.

dbt reports a YAML syntax error "near line N", the line where the parser gave up. For an
unterminated quoted scalar that is the end of the file (the scanner read on, looking for the
closing quote); the line to read is where the scalar starts, which the parser's own error
carries as its context mark ("while scanning a quoted scalar ... line 4"). dbt parses YAML
with PyYAML, so the same parser, run on the same file, marks the same place.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml


@dataclass(frozen=True)
class YamlMark:
    line: int  # 1-based
    what: str  # the parser's words: "while scanning a quoted scalar", "expected ',' or ']'"

    def describe(self, path: str) -> str:
        return f"{path} line {self.line} ({self.what})"


def yaml_error_mark(text: str) -> YamlMark | None:
    """The line a YAML text's syntax error is at: where a token being scanned started (an
    unterminated scalar), else where the parser found the problem; None when it parses."""
    try:
        yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        scanning = isinstance(exc, yaml.scanner.ScannerError) and "scanning" in (exc.context or "")
        if scanning and exc.context_mark is not None:
            return YamlMark(exc.context_mark.line + 1, exc.context or "")
        if exc.problem_mark is not None:
            return YamlMark(exc.problem_mark.line + 1, exc.problem or exc.context or "")
    except yaml.YAMLError:
        return None
    return None
