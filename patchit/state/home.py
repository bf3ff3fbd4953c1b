"""The state dir rule, standard library only: the dbt wrapper's green path resolves it without
importing the configuration's models."""

from __future__ import annotations

import os
from pathlib import Path


def resolve_home(cli_home: str | os.PathLike[str] | None = None) -> Path:
    """`--home`, else `PATCHIT_HOME`, else `$XDG_STATE_HOME/patchit` (`~/.local/state/patchit`)."""
    if cli_home:
        return Path(cli_home).expanduser().resolve()
    env = os.environ.get("PATCHIT_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return default_home()


def default_home() -> Path:
    """The state dir patchit finds when neither `--home` nor `PATCHIT_HOME` names one."""
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return (Path(xdg).expanduser() / "patchit").resolve()
