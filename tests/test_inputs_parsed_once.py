"""`parsed_once`: a file parsed once while it stays the same, a copy handed out each time."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.errors import BadInputError
from patchit.inputs import parsed_once


def test_the_same_text_is_parsed_once_and_each_caller_gets_its_own_copy(tmp_path: Path) -> None:
    path = tmp_path / "dbt_project.yml"
    path.write_text("a: 1\n")
    calls: list[Path] = []

    def parse(p: Path) -> dict[str, list[str]]:
        calls.append(p)
        return {"lines": p.read_text().splitlines()}

    first = parsed_once(path, parse, "test")
    first["lines"].append("changed by a caller")
    assert parsed_once(path, parse, "test") == {"lines": ["a: 1"]}
    assert len(calls) == 1
    path.write_text("a: 2\n")  # the same size, other text: parsed again
    assert parsed_once(path, parse, "test") == {"lines": ["a: 2"]}
    assert len(calls) == 2
    elsewhere = tmp_path / "worktree" / "dbt_project.yml"  # the same text in a new worktree
    elsewhere.parent.mkdir()
    elsewhere.write_text("a: 2\n")
    assert parsed_once(elsewhere, parse, "test") == {"lines": ["a: 2"]}
    assert len(calls) == 2
    assert parsed_once(elsewhere, parse, "other parser") == {"lines": ["a: 2"]}
    assert len(calls) == 3


def test_what_the_parser_raises_is_raised_every_time(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yml"
    path.write_text(": :\n")
    calls = 0

    def parse(p: Path) -> None:
        nonlocal calls
        calls += 1
        raise BadInputError(f"{p}: not valid YAML")

    for _ in range(2):
        with pytest.raises(BadInputError):
            parsed_once(path, parse, "test")
    assert calls == 2
    for unreadable in (tmp_path / "missing.yml", tmp_path):  # the parser says what is wrong
        with pytest.raises(BadInputError):
            parsed_once(unreadable, parse, "test")
    assert calls == 4
