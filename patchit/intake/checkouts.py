"""This host's checkout of an event's repository, when the event names it by remote URL or by
Airflow DAG bundle.

An event carries the path of the clone it failed in (`repo_path`) and, when that clone has a
remote, the remote's normalised URL (`repo_url`, `github.com/acme/dags`); an Airflow event
also carries its DAG bundle's name (`context.bundle_name`). A worker on another host has its
own clone somewhere else: `local_checkout` finds it (the event's own path when it is a clone
of that URL here, else the `[repos]` table of `$PATCHIT_HOME/patchit.toml`: the URL's entry,
else the bundle's `"bundle:<name>"` entry) and returns the event as if it had failed there:
every mention of the other clone's root (paths, traceback, messages) now names this one, so
fingerprints and cause keys come out the same on every host. Without a checkout it is one
BadInputError line saying how to map one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from patchit.config import load_deployment
from patchit.errors import BadInputError
from patchit.events.model import BUNDLE_PREFIX, UniversalFailureEvent, bundle_of
from patchit.intake.gitinfo import find_git_root, read_head, read_remote_url
from patchit.state.url import deployment_file


class NoCheckoutError(BadInputError):
    """The event's repository has no clone here and `[repos]` does not name it (a worker
    keeps the event as it came: an incident left open; a wrong mapping is a plain
    BadInputError). `hint`: the message without the event's name."""

    def __init__(self, event: UniversalFailureEvent, hint: str) -> None:
        super().__init__(f"{event.short()}: {hint}")
        self.hint = hint


def local_checkout(event: UniversalFailureEvent, home: Path) -> UniversalFailureEvent:
    """`event` with `repo_path` at this host's clone of `event.repo_url`, else at the
    checkout `[repos]` maps its DAG bundle to (unchanged when it names neither, or already
    points at a clone of its URL)."""
    url = event.repo_url
    if url and _is_clone(event.repo_path, url):
        return event
    bundle = bundle_of(event)
    if not url and not bundle:  # named by its path alone: no mapping to read (per event)
        return event
    repos = load_deployment(home).repos
    bundle_key = f"{BUNDLE_PREFIX}{bundle}" if bundle else None
    if url and url in repos:
        return _at_url_mapping(event, url, repos[url], home)
    if bundle_key and bundle_key in repos:
        return _at_bundle_mapping(event, bundle_key, repos[bundle_key], home)
    if not url and (not bundle_key or _is_checkout(event.repo_path)):
        return event  # named by its path alone, or a checkout here: healed where it is
    name = f"repository {url}" if url else f"DAG bundle {bundle}"
    where = f"{event.repo_path} is not a {'clone of it' if url else 'git checkout'} here"
    keys = " or ".join(f'"{key}"' for key in (url, bundle_key) if key)
    raise NoCheckoutError(
        event,
        f"{name} has no checkout on this host ({where if event.repo_path else 'no path'}); map "
        f'it in {deployment_file(home)}: [repos] {keys} = "/path/to/its/checkout"',
    )


def _at_url_mapping(
    event: UniversalFailureEvent, url: str, mapped: str, home: Path
) -> UniversalFailureEvent:
    local = Path(mapped).expanduser().resolve()
    if not _is_clone(str(local), url):
        found = read_remote_url(local) if local.is_dir() else None
        why = f"its remote is {found}" if found else "it is not a git checkout with that remote"
        raise BadInputError(
            f"{deployment_file(home)}: [repos] maps {url} to {local}, but {why}; fix the mapping"
        )
    return rebase(event, event.repo_path, str(local))


def _at_bundle_mapping(
    event: UniversalFailureEvent, key: str, mapped: str, home: Path
) -> UniversalFailureEvent:
    """The event moved to the bundle's folder in this host's checkout (`mapped`: the
    checkout's root, or the folder inside it the bundle is deployed from). From a bundle
    inside a git checkout on its host, that checkout's root moves to this one's; from a
    bundle folder outside git (no `repo_path`), the bundle's own path (`context.bundle_path`)
    moves to `mapped`, and the commit is this checkout's HEAD."""
    local = Path(mapped).expanduser().resolve()
    root = find_git_root(local) if local.is_dir() else None
    if root is None:
        raise BadInputError(
            f"{deployment_file(home)}: [repos] maps {key} to {local}, but it is not a git "
            "checkout; fix the mapping"
        )
    if event.repo_path:
        return rebase(event, event.repo_path, str(root))
    old = event.context.get("bundle_path")
    moved = rebase(event, old, str(local)) if isinstance(old, str) and old else event
    dag_file = moved.context.get("dag_file")
    unit_path = moved.unit_path
    if unit_path is None and isinstance(dag_file, str):
        try:
            unit_path = Path(dag_file).relative_to(root).as_posix()
        except ValueError:
            unit_path = None
    return moved.model_copy(
        update={"repo_path": str(root), "commit": moved.commit or read_head(root),
                "unit_path": unit_path}
    )  # fmt: skip


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


# inside `looked_at_once`: what a path is (a checkout; a clone of which URL), read once
_LOOKS: ContextVar[dict[tuple[str, str], bool] | None] = ContextVar("patchit_looks", default=None)


@contextmanager
def looked_at_once() -> Iterator[None]:
    """Within it, whether a path is a checkout, or a clone of a URL, is read from disk once
    per path: a storm's 10,000 events name one checkout (a worker's batch; a clone made
    meanwhile is seen by the next batch)."""
    token = _LOOKS.set({}) if _LOOKS.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _LOOKS.reset(token)


def _look(kind: str, path: str, read: Callable[[], bool]) -> bool:
    looks = _LOOKS.get()
    if looks is None:
        return read()
    key = (kind, path)
    if key not in looks:
        looks[key] = read()
    return looks[key]


def _is_checkout(path: str | None) -> bool:
    return bool(path) and _look("checkout", str(path), lambda: (
        Path(str(path)).is_dir() and find_git_root(Path(str(path))) is not None))  # fmt: skip


def _is_clone(path: str | None, url: str) -> bool:
    return bool(path) and _look(f"clone of {url}", str(path), lambda: (
        Path(str(path)).is_dir() and read_remote_url(Path(str(path))) == url))  # fmt: skip
