"""Which state backend this deployment uses, and the deployment file that may say so.

Standard library only: the Airflow callback and the dbt wrapper's green path read it.

The state is chosen before any repository is known, so it is not in a repository's
`.patchit.toml` but in the state dir's own `$PATCHIT_HOME/patchit.toml`:

    [state]
    url = "postgresql://patchit@db.internal/patchit"

    [repos]
    "github.com/acme/dags" = "/srv/checkouts/dags"

`PATCHIT_STATE_URL` (env) wins over the file; an empty value means the embedded SQLite state.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError

STATE_URL_ENV = "PATCHIT_STATE_URL"
DEPLOYMENT_FILE = "patchit.toml"
SCHEMES = ("postgresql", "postgres")
STATE_KEYS = {"url"}  # config.StateConfig's fields (this module reads the file without pydantic)


class StateUrlError(BadInputError):
    """The state URL (or the deployment file holding it) is unusable; one line, masked."""


def deployment_file(home: Path) -> Path:
    return home / DEPLOYMENT_FILE


def read_deployment(home: Path) -> dict[str, Any]:
    """`$PATCHIT_HOME/patchit.toml` as a dict ({} when there is none)."""
    path = deployment_file(home)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return {}  # no file (an unusable home is reported by what opens it)
    except OSError as exc:
        raise StateUrlError(f"{path}: cannot read ({exc.strerror}); fix its permissions") from exc
    except UnicodeDecodeError as exc:
        raise StateUrlError(f"{path}: not UTF-8 text; fix or remove it") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StateUrlError(f"{path}: not valid TOML ({exc}); fix or remove the file") from exc


def state_url(home: Path) -> str | None:
    """The Postgres URL of the shared state, or None for the embedded SQLite files.

    Raises StateUrlError for a URL that is not a postgresql:// one."""
    env = os.environ.get(STATE_URL_ENV)
    if env is not None:
        url, where = env.strip(), STATE_URL_ENV
    else:
        section = read_deployment(home).get("state", {})
        if not isinstance(section, dict):
            raise StateUrlError(
                f'{deployment_file(home)}: state must be a [state] table (url = "...")'
            )
        unknown = sorted(set(section) - STATE_KEYS)
        if unknown:
            raise StateUrlError(
                f"{deployment_file(home)}: [state] has no key {', '.join(unknown)}"
                f" (it knows: {', '.join(sorted(STATE_KEYS))}); fix the file"
            )
        value = section.get("url")
        if value is not None and not isinstance(value, str):
            raise StateUrlError(f"{deployment_file(home)}: [state] url must be a string")
        url, where = (value or "").strip(), f"{deployment_file(home)} [state] url"
    if not url:
        return None
    scheme = url.partition("://")[0].lower()
    if "://" not in url or scheme not in SCHEMES:
        raise StateUrlError(
            f"{where} = {mask_url(url)!r}: not a postgresql:// URL; set it to "
            "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME, or unset it for the embedded "
            "SQLite state"
        )
    return url


def mask_url(url: str) -> str:
    """The URL with its password (and any `password=` parameter) replaced by `***`."""
    masked = re.sub(r"^([a-zA-Z][\w+.-]*://[^:/@]*):[^@]*@", r"\1:***@", url)
    return re.sub(r"(password=)[^&\s]*", r"\1***", masked, flags=re.IGNORECASE)


def describe_state(home: Path) -> str:
    """One line: where this deployment's spool and memory live."""
    url = state_url(home)
    return f"postgres {mask_url(url)}" if url else f"sqlite under {home}"
