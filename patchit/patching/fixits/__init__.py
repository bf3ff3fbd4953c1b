"""Tier-0 fix-its: deterministic, offline strategies for well-recognised dbt failures.

Each module holds one family; all are registered under the `patchit.strategies` entry point
group in pyproject.toml, the same hook third-party strategies use.
"""

from patchit.patching.fixits.columns import RenameColumnStrategy
from patchit.patching.fixits.macros import FixMacroStrategy
from patchit.patching.fixits.refs import FixRefStrategy, SelfRefCycleStrategy
from patchit.patching.fixits.yaml_props import FixYamlStrategy

__all__ = [
    "FixMacroStrategy",
    "FixRefStrategy",
    "FixYamlStrategy",
    "RenameColumnStrategy",
    "SelfRefCycleStrategy",
]
