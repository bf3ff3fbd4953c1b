"""How the warm worker's tunings (`tuning`, `tuning_parse`) replace a function of dbt's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def replace_once(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    """`owner.name` becomes `make(original)`, once (a second install leaves it); the
    replacement keeps dbt's own as `dbt_original`."""
    original = getattr(owner, name)
    if getattr(original, "_patchit", False):
        return
    replacement = make(original)
    replacement._patchit = True
    replacement.dbt_original = original
    setattr(owner, name, replacement)
