"""Screens: a cheap look at a candidate before its harness run (DESIGN.md, Harnesses).

A harness screens through `Harness.screen`, with these pieces: `compile_python` (changed
`.py` files compiled), `DbtScreen` (changed models bound by DuckDB against a schema-only
clone of the warehouse snapshot). A screen rejects only what is certain to fail, and passes
on whatever it cannot judge: it never replaces the harness.
"""

from patchit.screen.dbt import DbtScreen, Where
from patchit.screen.model import Screening
from patchit.screen.python import compile_python

__all__ = ["DbtScreen", "Screening", "Where", "compile_python"]
