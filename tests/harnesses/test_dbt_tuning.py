"""What the warm worker changes in dbt's code answers as dbt does (real dbt classes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from patchit.harnesses import dbt_tuning

pytestmark = pytest.mark.slow  # imports dbt


@pytest.fixture
def linker_cls() -> Iterator[type]:
    from dbt.compilation import Linker

    original = Linker.find_cycles
    dbt_tuning._acyclic_first()
    yield Linker
    Linker.find_cycles = original  # type: ignore[method-assign]


def test_a_cycle_is_still_found_and_named(linker_cls: type) -> None:
    linker = linker_cls()
    linker.dependency("model.p.b", "model.p.a")
    linker.dependency("model.p.c", "model.p.b")
    assert linker.find_cycles() is None
    linker.dependency("model.p.a", "model.p.c")  # a -> b -> c -> a
    cycle = linker.find_cycles()
    assert cycle is not None
    assert set(cycle.split(" --> ")) == {"model.p.a", "model.p.b", "model.p.c"}
    assert linker_cls.find_cycles._patchit  # the patched one answered
