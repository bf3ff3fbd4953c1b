"""How the warm worker's tunings (`tuning`, `tuning_parse`) replace a function of dbt's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def replace_once(
    owner: Any, name: str, make: Callable[[Any], Any], *, layer: str | None = None
) -> None:
    """`owner.name` becomes `make(original)`, once (a second install leaves it); the
    replacement keeps the function it replaced as `dbt_original`.

    Without `layer` a function patchit replaced already is left as it is. With one, the
    replacement wraps whatever is there, another tuning's replacement too, unless a function
    of that layer is in the chain already: two tunings of one function of dbt's both apply,
    whichever installs first."""
    original = getattr(owner, name)
    if layer is None and getattr(original, "_patchit", False):
        return
    held = original
    while held is not None:
        if layer is not None and getattr(held, "_patchit_layer", None) == layer:
            return
        held = getattr(held, "dbt_original", None)
    replacement = make(original)
    replacement._patchit = True
    replacement._patchit_layer = layer
    replacement.dbt_original = original
    setattr(owner, name, replacement)
