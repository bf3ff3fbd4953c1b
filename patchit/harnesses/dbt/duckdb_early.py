"""A run's DuckDB file opened while dbt starts up, not when dbt-duckdb first connects.

Opening a DuckDB database first builds its catalog of built-in functions: ~25 ms a run, spent
on the run's critical path where dbt-duckdb connects (its first query, listing schemas). DuckDB
does that work without the GIL, so `open_early` starts it in a thread at the start of the run,
beside dbt's flags, profile and parse. When dbt-duckdb then connects to the same file with the
same settings, DuckDB hands it the database already open (its instance cache, which resolves
relative paths), and the early connection is closed at once. A connect to that file with other
settings (a plugin's config, read-only) closes the early connection first, so dbt opens the
file exactly as it would have. A connect to any other database is left alone.

The request names the file: `{"duckdb_early": {"path": <absolute>, "config": {...}}}` (the
profile's `config_options`), set by the harness for a DuckDB file target. Only a fork or a
one-run process opens early; the worker itself stays single-threaded (it forks).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

REQUEST_KEY = "duckdb_early"


class _Early:
    def __init__(self, connect: Any, path: str, config: dict[str, Any]) -> None:
        self.path, self.config = path, config
        self.real = os.path.realpath(path)
        self.con: Any = None
        self._connect = connect
        self.thread = threading.Thread(target=self._open, name="patchit-duckdb-early",
                                       daemon=True)  # fmt: skip

    def _open(self) -> None:
        with contextlib.suppress(Exception):  # not opened: dbt opens the file itself
            self.con = self._connect(self.path, read_only=False, config=dict(self.config))

    def close(self) -> None:
        self.thread.join()
        con, self.con = self.con, None
        if con is not None:
            with contextlib.suppress(Exception):
                con.close()


_early: _Early | None = None
_real_connect: Any = None
_last = ""  # what became of this process's early open (`outcome`)


def open_early(request: dict[str, Any]) -> bool:
    """Start opening the request's DuckDB file (see the module docstring); whether it did."""
    global _early
    spec = request.get(REQUEST_KEY)
    if _early is not None or not isinstance(spec, dict):
        return False
    path, config = spec.get("path"), spec.get("config") or {}
    if not isinstance(path, str) or not os.path.isabs(path) or not isinstance(config, dict):
        return False
    try:
        import duckdb
    except ImportError:
        return False
    _install(duckdb)
    _early = _Early(_real_connect, path, config)
    _early.thread.start()
    _said("opened")
    return True


def release() -> None:
    """At the end of a run: the early connection closed if dbt never took the database over."""
    global _early
    early, _early = _early, None
    if early is not None:
        _said("unused")
        early.close()


def outcome() -> str:
    """What became of the early open: "taken" (dbt connected to the database it opened),
    "reopened" (dbt asked for other settings), "failed" (it could not open the file),
    "unused" (dbt never connected), "" (nothing was opened early)."""
    return _last


def _said(what: str) -> None:
    global _last
    _last = what


def _install(duckdb: Any) -> None:
    global _real_connect
    if _real_connect is not None:
        return
    _real_connect = real = duckdb.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        global _early
        early = _early
        if early is None:
            return real(*args, **kwargs)
        database, read_only, config, other = _arguments(args, kwargs)
        if not isinstance(database, (str, os.PathLike)) or str(database).startswith(":"):
            return real(*args, **kwargs)
        with contextlib.suppress(OSError, ValueError):
            if os.path.realpath(os.fspath(database)) != early.real:
                return real(*args, **kwargs)  # another database
        same = not other and read_only is False and (config or {}) == early.config
        early.thread.join()
        _early = None
        if not same:  # opened with other settings: as if it had not been opened early
            _said("reopened")
            early.close()
            return real(*args, **kwargs)
        try:
            return real(*args, **kwargs)  # the database open already: DuckDB's own, at once
        finally:
            _said("taken" if early.con is not None else "failed")
            early.close()

    connect.__doc__ = real.__doc__
    duckdb.connect = connect


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any, bool]:
    """`duckdb.connect`'s (database, read_only, config), and whether it was given more."""
    names = ("database", "read_only", "config")
    given = dict(zip(names, args, strict=False))
    other = len(args) > len(names) or any(k not in names or k in given for k in kwargs)
    given.update((k, v) for k, v in kwargs.items() if k in names)
    return (
        given.get("database", ":memory:"),
        given.get("read_only", False),
        given.get("config"),
        other,
    )
