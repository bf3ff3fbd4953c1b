"""The docs' generator (`docs/hooks/reference.py`), loaded as mkdocs loads it: from its path."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.conftest import ROOT

HOOK = ROOT / "docs" / "hooks" / "reference.py"


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("patchit_docs_reference", HOOK)
    assert spec is not None and spec.loader is not None, HOOK
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
