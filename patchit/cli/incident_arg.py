"""The `INCIDENT_ID` argument of `report`, `inspect`, `pr`, `approve` and `reject`: a full id,
or the short forms `patchit.memory.short_ids` accepts, turned into the full id before the
command runs (so every line it prints names the incident in full)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def incident_argument(func: F) -> F:
    return click.argument("incident_id", callback=_resolve)(func)


def _resolve(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    from patchit.config import resolve_home  # pydantic: not at `patchit --help`
    from patchit.memory import Memory
    from patchit.memory.short_ids import looks_like_incident_id, resolve_incident_id

    if not looks_like_incident_id(value):
        return value
    obj = ctx.find_root().obj
    memory = Memory.open(resolve_home(obj.get("home") if obj else None))
    try:
        return resolve_incident_id(memory, value)
    finally:
        memory.close()
