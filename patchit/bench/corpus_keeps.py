"""What a fixed branch must keep of the breaking change: the author's intent, made checkable.

The hidden check compares a fixed branch's values with the good commit's, and a revert
restores exactly those values: a branch that undoes a rename or drops a new column passes it.
So a scenario also states what must survive (`keeps`): a text the branch's file still holds
(`path` + `text`: "plan_code as plan_id" stays in the staging model), or a query the fixed
branch must answer as the breaking commit meant (`sql`, with the `rows` it must give, or none:
it must run, e.g. it selects the renamed column). A fixed branch that misses one reverts an
intent, and the judge counts it as a wrong fix, never as fixed.

Text is matched with runs of whitespace made one space, so a fix may re-indent or re-wrap
the line it completes without losing the intent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

_SPACE = re.compile(r"\s+")


class Keep(BaseModel):
    """One thing of the breaking change a fixed branch must keep."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    text: str | None = None
    sql: str | None = None
    rows: list[list[Any]] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Keep:
        has_text = self.path is not None or self.text is not None
        if has_text == (self.sql is not None):
            raise ValueError("keeps: give either path and text, or sql (with optional rows)")
        if has_text and (self.path is None or not self.text):
            raise ValueError("keeps: a text keep needs both path and a non-empty text")
        if self.rows is not None and self.sql is None:
            raise ValueError("keeps: rows go with sql")
        return self

    def describe(self) -> str:
        if self.sql is not None:
            answer = "runs" if self.rows is None else f"gives {self.rows!r}"
            return f"query `{_squash(self.sql)}` {answer}"
        return f"{self.path} keeps {_squash(self.text or '')!r}"


def _squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def text_kept(keep: Keep, checkout: Path) -> bool:
    """Whether the checkout's file holds the keep's text (whitespace runs equal)."""
    assert keep.path is not None and keep.text is not None
    try:
        content = (checkout / keep.path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return _squash(keep.text) in _squash(content)


Query = Callable[[str], Any]  # rows as JSON-ready lists, or an error string / None


def keeps_missing(keeps: list[Keep], checkout: Path, query: Query | None) -> list[str]:
    """The keeps a checkout misses, described; `query` answers SQL over its built data (None:
    the checkout has no data to ask, so only text keeps are judged)."""
    missing = []
    for keep in keeps:
        if keep.sql is None:
            if not text_kept(keep, checkout):
                missing.append(keep.describe())
            continue
        if query is None:
            continue
        answer = query(keep.sql)
        if not isinstance(answer, list) or (keep.rows is not None and answer != keep.rows):
            missing.append(keep.describe())
    return missing
