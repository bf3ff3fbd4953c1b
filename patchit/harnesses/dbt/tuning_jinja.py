"""What the warm dbt worker changes in dbt's Jinja contexts (see `tuning` for the rest).

Every node a run compiles or executes gets a context holding every macro of the project and
its adapter, each wrapped in a `MacroGenerator` bound to that context: on a DuckDB project
about 500 macros, two contexts a node, some 42,000 generators for a 21-node run. A
generator's construction is three nested `__init__` calls that each set attributes; here it
sets the same four attributes in one, when a probe shows it leaves a generator exactly as
dbt's own construction does (else dbt's is kept).
"""

from __future__ import annotations

from typing import Any

from patchit.harnesses.dbt.tuning_base import replace_once


def install() -> None:
    try:
        from dbt.clients.jinja import MacroGenerator
    except ImportError:
        return
    if _same_as_dbt_s(MacroGenerator):
        replace_once(MacroGenerator, "__init__", lambda _dbt_s: _init)


def _init(self: Any, macro: Any, context: Any = None, node: Any = None, stack: Any = None) -> None:
    self.context = context
    self.macro = macro
    self.node = node
    self.stack = stack


def _same_as_dbt_s(cls: Any) -> bool:
    """Whether `_init` leaves a generator as dbt's `__init__` does (a probe of each)."""
    parts: tuple[Any, ...] = (object(), {}, object(), object())
    theirs, ours = cls.__new__(cls), cls.__new__(cls)
    try:
        cls.__init__(theirs, *parts)
        _init(ours, *parts)
        return bool(theirs.__dict__ == ours.__dict__) and all(
            theirs.__dict__[k] is ours.__dict__[k] for k in theirs.__dict__
        )
    except Exception:  # a dbt whose generators are made otherwise: left as it is
        return False
