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
    if layer is None:
        if getattr(original, "_patchit", False):
            return
    elif layer in _layers(original):
        return
    replacement = make(original)
    replacement._patchit = True
    replacement._patchit_layer = layer
    replacement.dbt_original = original
    setattr(owner, name, replacement)


def _layers(function: Any) -> set[str | None]:
    """The layers of patchit's replacements wrapping `function`, down to dbt's own."""
    found = set()
    while getattr(function, "_patchit", False):
        found.add(getattr(function, "_patchit_layer", None))
        function = function.dbt_original
    return found
