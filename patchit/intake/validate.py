"""Checks an event must pass before anything is recorded for it (bad input: exit 2)."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from patchit.errors import BadInputError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.sandbox.git import repo_root, run_git


def check_healable(event: UniversalFailureEvent, where: str) -> Path:
    """The event's repository root, or BadInputError naming `where` and what to fix."""
    if not event.repo_path:
        raise BadInputError(
            f"{where}: the event has no repo_path (it was recorded outside git); "
            "set repo_path to the git root holding the failing code"
        )
    if repo_root(Path(event.repo_path)) is None:
        raise BadInputError(
            f"{where}: repo_path {event.repo_path!r} is not a git repository; "
            "set repo_path to the git root holding the failing code"
        )
    repo = Path(event.repo_path)
    if not event.commit:
        raise BadInputError(f"{where}: event has no commit; set `commit` to the failing sha")
    if not run_git(repo, "cat-file", "-t", event.commit, check=False).strip() == "commit":
        raise BadInputError(
            f"{where}: commit {event.commit} is not in {repo}; set `commit` to the failing sha"
        )
    if event.unit_path is not None:
        path = PurePosixPath(event.unit_path)
        if path.is_absolute() or ".." in path.parts:
            raise BadInputError(
                f"{where}: unit_path {event.unit_path!r} must be relative to repo_path, "
                "inside the repository"
            )
    if event.source is FailureSource.DBT and event.dbt is None:
        raise BadInputError(
            f"{where}: a dbt event needs its `dbt` invocation block (project_dir, cwd, ...); "
            "record failures with `patchit dbt -- ...` to get complete events"
        )
    for name, artifact in event.artifacts.items():
        check_json_artifact(name, Path(artifact), where)
    return repo


def check_json_artifact(name: str, path: Path, where: str) -> None:
    """A dbt artifact the event points at must be readable JSON, or the event is bad input."""
    if path.suffix != ".json" or not path.exists():
        return
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInputError(
            f"{path}: {name} artifact of {where} is unreadable or truncated JSON ({exc}); "
            "re-run dbt to regenerate it or drop it from the event's artifacts"
        ) from exc
