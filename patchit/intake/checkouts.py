"""This host's checkout of an event's repository, when the event names it by remote URL.

An event carries the path of the clone it failed in (`repo_path`) and, when that clone has a
remote, the remote's normalised URL (`repo_url`, `github.com/acme/dags`). A worker on another
host has its own clone somewhere else: `local_checkout` finds it (the event's own path when it
is a clone of that URL here, else the `[repos]` table of `$PATCHIT_HOME/patchit.toml`) and
returns the event as if it had failed there: every mention of the other clone's root (paths,
traceback, messages) now names this one, so fingerprints and cause keys come out the same on
every host. Without a checkout it is one BadInputError line saying how to map one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from patchit.config import load_deployment
from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.intake.gitinfo import read_remote_url
from patchit.state.url import deployment_file


class NoCheckoutError(BadInputError):
    """The event's repository has no clone here and `[repos]` does not name it (a worker
    keeps the event as it came: an incident left open; a wrong mapping is a plain
    BadInputError). `hint`: the message without the event's name."""

    def __init__(self, event: UniversalFailureEvent, hint: str) -> None:
        super().__init__(f"{event.short()}: {hint}")
        self.hint = hint


def local_checkout(event: UniversalFailureEvent, home: Path) -> UniversalFailureEvent:
    """`event` with `repo_path` at this host's clone of `event.repo_url` (unchanged when it
    has no URL, or already points at such a clone)."""
    url = event.repo_url
    if not url or _is_clone(event.repo_path, url):
        return event
    mapped = load_deployment(home).repos.get(url)
    if mapped is None:
        where = f"{event.repo_path} is not a clone of it here" if event.repo_path else "no path"
        raise NoCheckoutError(
            event,
            f"repository {url} has no checkout on this host ({where}); map "
            f'it in {deployment_file(home)}: [repos] "{url}" = "/path/to/its/checkout"',
        )
    local = Path(mapped).expanduser().resolve()
    if not _is_clone(str(local), url):
        found = read_remote_url(local) if local.is_dir() else None
        why = f"its remote is {found}" if found else "it is not a git checkout with that remote"
        raise BadInputError(
            f"{deployment_file(home)}: [repos] maps {url} to {local}, but {why}; fix the mapping"
        )
    return rebase(event, event.repo_path, str(local))


def rebase(event: UniversalFailureEvent, old: str | None, new: str) -> UniversalFailureEvent:
    """The event with the root `old` replaced by `new` wherever it appears."""
    if not old:
        return event.model_copy(update={"repo_path": new})
    text = event.model_dump_json()  # non-ASCII as is: so are the roots looked for in it
    escaped = json.dumps(old.rstrip("/"), ensure_ascii=False)[1:-1]
    replacement = json.dumps(new.rstrip("/"), ensure_ascii=False)[1:-1]
    moved = re.sub(
        # the root itself: not /srv/dags2, nor /mnt/srv/dags, for /srv/dags (but after a
        # newline or tab, escaped in the JSON text as \n, \t)
        r"(?:(?<![\w.~/-])|(?<=\\[nrt]))" + re.escape(escaped) + r"(?![\w.-])",
        lambda _m: replacement,
        text,
    )
    return UniversalFailureEvent.model_validate_json(moved)


def _is_clone(path: str | None, url: str) -> bool:
    return bool(path) and Path(str(path)).is_dir() and read_remote_url(Path(str(path))) == url
