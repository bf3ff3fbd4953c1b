"""`tuning_base.replace_once`: one replacement per tuning, and two tunings of one function
both apply whichever installs first."""

from __future__ import annotations

from typing import Any


def _owner() -> Any:
    class Owner:
        def build(self) -> list[str]:
            return ["dbt"]

    return Owner


def _wrap(tag: str) -> Any:
    def make(inner: Any) -> Any:
        def replacement(self: Any) -> list[str]:
            return [tag, *inner(self)]

        return replacement

    return make


def test_a_plain_replacement_is_made_once_and_keeps_the_original() -> None:
    from patchit.harnesses.dbt.tuning_base import replace_once

    owner = _owner()
    dbt_s = owner.build
    replace_once(owner, "build", _wrap("a"))
    replace_once(owner, "build", _wrap("b"))  # a second plain one: left as it is
    assert owner().build() == ["a", "dbt"]
    assert owner.build.dbt_original is dbt_s


def test_layers_wrap_other_tunings_in_either_order_and_only_once() -> None:
    from patchit.harnesses.dbt.tuning_base import replace_once

    for order in (("kept", "due"), ("due", "kept")):
        owner = _owner()
        for layer in order + order:  # each installed twice
            replace_once(owner, "build", _wrap(layer), layer=layer)
        assert owner().build() == [order[1], order[0], "dbt"]
    owner = _owner()
    replace_once(owner, "build", _wrap("plain"))
    replace_once(owner, "build", _wrap("due"), layer="due")  # a layer wraps a plain one too
    replace_once(owner, "build", _wrap("plain2"))  # but a plain one does not wrap a layer
    assert owner().build() == ["due", "plain", "dbt"]
