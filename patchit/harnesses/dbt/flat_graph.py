"""dbt's `graph` context variable, each node serialised when a run first reads it.

After parsing, dbt serialises every node of the manifest into `manifest.flat_graph` (the
`graph` a macro or model may read: `graph.nodes.values()`), one `to_dict` per node. On a large
project that is a large share of a warm run, and a run reads `graph` only when some macro or
model does, which most never do. The warm worker (`tuning`) makes `build_flat_graph` build
the same dict of sections, each section a `LazySection`: the same keys, each node's value made
by the same `to_dict(omit_none=False)` on its first read, then kept.

A node read only after it was compiled shows its compiled SQL too, where dbt's copy (made at
parse time) would not. What macros read from `graph` (names, schemas, configs, dependencies,
resource types) is fixed at parse time and the same either way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

SECTIONS = (
    "exposures", "functions", "groups", "metrics", "nodes", "sources", "semantic_models",
    "saved_queries",
)  # fmt: skip
_UNREAD = object()  # a value not serialised yet


class LazySection(dict[str, Any]):
    """A dict of a manifest section's unique ids, each value `entries[id].to_dict(...)` made
    on its first read. Every way of reading a value goes through `__getitem__`."""

    def __init__(self, entries: dict[str, Any]) -> None:
        super().__init__(dict.fromkeys(entries, _UNREAD))
        self._entries = dict(entries)
        self._lock = threading.Lock()  # nodes compile in several threads

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        if value is _UNREAD:
            with self._lock:
                value = super().__getitem__(key)
                if value is _UNREAD:
                    value = self._entries.pop(key).to_dict(omit_none=False)
                    super().__setitem__(key, value)
        return value

    @property
    def unread(self) -> int:
        return len(self._entries)

    def _all(self) -> dict[str, Any]:
        return {key: self[key] for key in list(dict.__iter__(self))}

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if super().__contains__(key) else default

    def values(self) -> Any:
        return self._all().values()

    def items(self) -> Any:
        return self._all().items()

    def copy(self) -> dict[str, Any]:
        return self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(list(dict.__iter__(self)))

    def __eq__(self, other: object) -> bool:
        return self._all() == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._all())

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (self._all(),))

    def __or__(self, other: Any) -> dict[str, Any]:  # type: ignore[override]
        return {**self._all(), **dict(other)}

    def __ror__(self, other: Any) -> dict[str, Any]:  # type: ignore[override]
        return {**dict(other), **self._all()}

    def pop(self, key: str, *default: Any) -> Any:
        if super().__contains__(key):
            value = self[key]
            super().__delitem__(key)
            return value
        return super().pop(key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        return self[key] if super().__contains__(key) else super().setdefault(key, default)

    def popitem(self) -> tuple[str, Any]:
        key = list(dict.__iter__(self))[-1]
        return key, self.pop(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._entries.pop(key, None)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._entries.pop(key, None)
        super().__delitem__(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value


def lazy_build_flat_graph(_dbt_s: Callable[[Any], None]) -> Callable[[Any], None]:
    """A `Manifest.build_flat_graph` that gives each section as a `LazySection` of the
    manifest's entries (dbt's builds every `to_dict` now)."""

    def build_flat_graph(manifest: Any) -> None:
        sections = [name for name in SECTIONS if hasattr(manifest, name)]
        manifest.flat_graph = {name: LazySection(getattr(manifest, name)) for name in sections}

    return build_flat_graph
