"""Redaction of evidence: the profile's literal secrets, and every text field of an `Evidence`.

The patterns themselves live in `patchit.text.redaction` (standard library only, so the Airflow
callback can use them); this module adds what needs YAML and the evidence model.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from patchit.evidence.model import Evidence
from patchit.text.inputs import read_input_text_or_none
from patchit.text.redaction import MASK, environment_secrets, is_secret_name, redact, scrub

__all__ = [
    "MASK",
    "dbt_profile_secrets",
    "environment_secrets",
    "profile_secrets",
    "redact",
    "redact_model",
]

# evidence holds whole files (a model's SQL, a DAG): cut only what is absurdly large
EVIDENCE_MAX_CHARS = 2_000_000


def profile_secrets(profiles_yml_text: str) -> list[str]:
    """Literal secret values in a profiles.yml (password, token, keys, ...), to mask anywhere.

    `{{ env_var(...) }}` templates are not secrets themselves and are skipped. Unparseable YAML
    yields no values; the regex patterns still apply to its text.
    """
    try:
        data = yaml.safe_load(profiles_yml_text)
    except (yaml.YAMLError, RecursionError, ValueError):
        return []
    found: list[str] = []
    seen: set[int] = set()  # YAML aliases share nodes: visit each once (no alias bombs)

    def walk(node: Any) -> None:
        if isinstance(node, dict | list):
            if id(node) in seen:
                return
            seen.add(id(node))
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and is_secret_name(key):
                    if isinstance(value, str | int) and not isinstance(value, bool):
                        text = str(value)
                        if "{{" not in text and text.strip():
                            found.append(text)
                    elif isinstance(value, dict | list):
                        walk(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    with contextlib.suppress(RecursionError):  # deeper than any profile: keep what was found
        walk(data)
    return found


def dbt_profile_secrets(profiles_dir: str | None, project: Path) -> list[str]:
    """Literal secrets of every profiles.yml dbt may read for `project`: `--profiles-dir`,
    `DBT_PROFILES_DIR`, the project dir, `~/.dbt`."""
    dirs = [Path(profiles_dir)] if profiles_dir else []
    if os.environ.get("DBT_PROFILES_DIR"):
        dirs.append(Path(os.environ["DBT_PROFILES_DIR"]))
    dirs.append(project)
    with contextlib.suppress(RuntimeError):  # no home directory to be found
        dirs.append(Path.home() / ".dbt")
    found: list[str] = []
    for directory in dict.fromkeys(dirs):
        text = read_input_text_or_none(directory / "profiles.yml")
        found += profile_secrets(text) if text else []
    return found


def redact_model(evidence: Evidence, extra_secrets: Iterable[str] = ()) -> Evidence:
    """A copy of `evidence` with every text field (the event's included) redacted."""
    data = evidence.model_dump(mode="python")
    return Evidence.model_validate(scrub(data, extra_secrets, EVIDENCE_MAX_CHARS))
