"""Configuration: the state dir (`PATCHIT_HOME`), policy and loop limits.

Read from `.patchit.toml` at the repository root when present; every key is optional.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from patchit.errors import BadInputError

DEFAULT_DENY = [
    "*.env*",
    "*secret*",
    "*credential*",
    "migrations/*",
    "**/migrations/*",
    "profiles.yml",
    "**/profiles.yml",
]


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=lambda: ["*"])
    deny: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY))
    max_files: int = 3
    max_lines: int = 40


class LoopConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_attempts: int = 3
    harness_timeout_s: float = 600.0


class PatchitConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)


def resolve_home(cli_home: str | os.PathLike[str] | None = None) -> Path:
    """`--home`, else `PATCHIT_HOME`, else `$XDG_STATE_HOME/patchit` (`~/.local/state/patchit`)."""
    if cli_home:
        return Path(cli_home).expanduser().resolve()
    env = os.environ.get("PATCHIT_HOME")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return (Path(xdg).expanduser() / "patchit").resolve()


def load_config(repo_root: Path | None) -> PatchitConfig:
    if repo_root is None:
        return PatchitConfig()
    path = repo_root / ".patchit.toml"
    if not path.is_file():
        return PatchitConfig()
    try:
        return PatchitConfig.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        msg = str(exc).splitlines()[0]
        raise BadInputError(
            f"{path}: invalid patchit config ({msg}); fix or remove the file"
        ) from exc
