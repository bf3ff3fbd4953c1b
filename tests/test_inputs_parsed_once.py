"""`parsed_once`: a file's text parsed once, a copy handed out each time."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.errors import BadInputError
from patchit.text.inputs import parsed_once


def _unreadable(path: Path) -> dict[str, list[str]]:
    raise BadInputError(f"{path}: cannot read")


def test_the_same_text_is_parsed_once_and_each_caller_gets_its_own_copy(tmp_path: Path) -> None:
    path = tmp_path / "dbt_project.yml"
    path.write_text("a: 1\n")
    calls: list[str] = []

    def parse(_path: Path, text: str) -> dict[str, list[str]]:
        calls.append(text)
        return {"lines": text.splitlines()}

    first = parsed_once(path, parse, "test", _unreadable)
    first["lines"].append("changed by a caller")
    assert parsed_once(path, parse, "test", _unreadable) == {"lines": ["a: 1"]}
    assert calls == ["a: 1\n"]  # parsed from the text that was hashed, once
    path.write_text("a: 2\n")  # the same size, other text: parsed again
    assert parsed_once(path, parse, "test", _unreadable) == {"lines": ["a: 2"]}
    elsewhere = tmp_path / "worktree" / "dbt_project.yml"  # the same text in a new worktree
    elsewhere.parent.mkdir()
    elsewhere.write_text("a: 2\n")
    assert parsed_once(elsewhere, parse, "test", _unreadable) == {"lines": ["a: 2"]}
    assert len(calls) == 2
    assert parsed_once(elsewhere, parse, "other parser", _unreadable) == {"lines": ["a: 2"]}
    assert len(calls) == 3


def test_what_the_parser_raises_is_raised_every_time(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yml"
    path.write_text(": :\n")
    calls = 0

    def parse(p: Path, _text: str) -> None:
        nonlocal calls
        calls += 1
        raise BadInputError(f"{p}: not valid YAML")

    for _ in range(2):
        with pytest.raises(BadInputError, match="not valid YAML"):
            parsed_once(path, parse, "test", _unreadable)
    assert calls == 2
    (tmp_path / "latin1.yml").write_bytes(b"name: caf\xe9\n")
    for unreadable in (tmp_path / "missing.yml", tmp_path, tmp_path / "latin1.yml"):
        with pytest.raises(BadInputError, match="cannot read"):  # `otherwise` says what
            parsed_once(unreadable, parse, "test", _unreadable)
    assert calls == 2
