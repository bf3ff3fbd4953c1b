"""Whether dbt is installed is asked without importing it (fast: no dbt import)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from patchit.harnesses.dbt import harness


def test_dbt_is_found_without_being_imported() -> None:
    before = {m for m in sys.modules if m == "dbt" or m.startswith("dbt.")}
    assert harness._dbt_installed()
    assert {m for m in sys.modules if m == "dbt" or m.startswith("dbt.")} == before


def test_a_missing_dbt_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "dbt" else real(name, *a)
    )
    assert not harness._dbt_installed()
