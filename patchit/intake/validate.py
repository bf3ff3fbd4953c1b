"""Checks an event must pass before anything is recorded for it (bad input: exit 2)."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from patchit.errors import BadInputError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.sandbox.git import repo_root, run_git
from patchit.text.inputs import as_path, input_exists, is_directory, read_input_json, shown

# a revision git can take as one argument: never an option, never a control character
_REVISION = re.compile(r"[\w./@^~{}+-]{1,200}")


def check_healable(event: UniversalFailureEvent, where: str) -> Path:
    """The event's repository root, or BadInputError naming `where` and what to fix."""
    if not event.repo_path:
        raise BadInputError(
            f"{where}: the event has no repo_path (it was recorded outside git); "
            "set repo_path to the git root holding the failing code"
        )
    repo = as_path(event.repo_path)
    if repo is None or not is_directory(repo) or repo_root(repo) is None:
        raise BadInputError(
            f"{where}: repo_path {shown(event.repo_path or '')!r} is not a git repository; "
            "set repo_path to the git root holding the failing code"
        )
    if not event.commit:
        raise BadInputError(f"{where}: event has no commit; set `commit` to the failing sha")
    if event.commit.startswith("-") or not _REVISION.fullmatch(event.commit):
        raise BadInputError(
            f"{where}: commit {shown(event.commit)!r} is not a git revision; "
            "set `commit` to the failing sha"
        )
    if not run_git(repo, "cat-file", "-t", event.commit, check=False).strip() == "commit":
        raise BadInputError(
            f"{where}: commit {event.commit} is not in {shown(repo)}; "
            "set `commit` to the failing sha"
        )
    if event.unit_path is not None:
        path = PurePosixPath(event.unit_path)
        if path.is_absolute() or ".." in path.parts or "\x00" in event.unit_path:
            raise BadInputError(
                f"{where}: unit_path {shown(event.unit_path)!r} must be relative to repo_path, "
                "inside the repository"
            )
    if event.source is FailureSource.DBT and event.dbt is None:
        raise BadInputError(
            f"{where}: a dbt event needs its `dbt` invocation block (project_dir, cwd, ...); "
            "record failures with `patchit dbt -- ...` to get complete events"
        )
    for name, artifact in event.artifacts.items():
        artifact_path = as_path(artifact)
        if artifact_path is None:
            raise BadInputError(f"{where}: artifact {shown(name)!r} has no usable path")
        check_json_artifact(name, artifact_path, where)
    return Path(repo)


def check_json_artifact(name: str, path: Path, where: str) -> None:
    """A dbt artifact the event points at must be readable JSON (a regular file: a FIFO or a
    device is refused unopened), or the event is bad input."""
    if path.suffix != ".json" or not input_exists(path):
        return
    try:
        read_input_json(path)
    except BadInputError as exc:
        raise BadInputError(
            f"{exc} ({shown(name)} artifact of {where}); "
            "re-run dbt to regenerate it or drop it from the event's artifacts"
        ) from exc
