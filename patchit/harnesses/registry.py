"""Finding harnesses: every harness, built-in or third-party, is an entry point in the group
`patchit.harnesses`, and one is chosen per event by inference or by an explicit override.

The inference (DESIGN.md, Harnesses), first rule that decides wins:
1. override: `select_harness(override=...)`, else `[sandbox] harness = "..."` in the repo's
   `.patchit.toml`, names the harness; it is used whether or not it thinks it applies.
2. platform of the event: dbt -> dbt; python -> python; ci -> ci; airflow -> the compose
   harness, then the local airflow one, then dbt (each only if it applies: compose needs a
   compose file with an Airflow service and a Docker engine that answers).
3. changed files (the event's `unit_path`, `context["changed_files"]`, and the files the
   failing commit changed): for an Airflow event, dbt files (models/, macros/, seeds/,
   snapshots/, *.sql, dbt_project.yml) and nothing under a dags/ folder put dbt first: the
   task ran dbt and the fault is in the project, which the dbt harness re-runs.
4. otherwise the first installed harness (entry-point name order) that applies.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from patchit.config import PatchitConfig, SandboxConfig, load_config
from patchit.errors import BadInputError, HarnessError, VcsError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.harnesses.base import Harness
from patchit.plugins import load_plugins
from patchit.sandbox.git import run_git

ENTRY_POINT_GROUP = "patchit.harnesses"
NEEDS = "name, configure, warm_up, applies_to, screen, verify and close"

BY_PLATFORM: dict[FailureSource, tuple[str, ...]] = {
    FailureSource.DBT: ("dbt",),
    FailureSource.AIRFLOW: ("compose", "airflow", "dbt"),
    FailureSource.PYTHON: ("python",),
    FailureSource.CI: ("ci",),
}
DBT_DIRS = {"models", "macros", "seeds", "snapshots", "analyses"}


def load_harnesses() -> list[Harness]:
    """One instance of each registered harness, in entry-point name order.

    A plugin that does not load, or is not a `Harness`, is skipped with a `PatchitWarning`
    naming it: one broken plugin must not take the others out.
    """
    return load_plugins(ENTRY_POINT_GROUP, Harness, NEEDS)  # type: ignore[type-abstract]


def changed_files(event: UniversalFailureEvent, repo: Path) -> list[str]:
    """Repo-relative paths the failure points at: its unit, the files intake named, and the
    files its commit changed (read from git; none when the repo or commit is unknown)."""
    files = [event.unit_path] if event.unit_path else []
    files += [str(f) for f in event.context.get("changed_files") or []]
    if event.commit and (repo / ".git").exists():
        try:
            out = run_git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "--root",
                          event.commit)  # fmt: skip
        except VcsError:
            out = ""  # a commit this clone does not have: infer from the rest
        files += out.splitlines()
    return list(dict.fromkeys(f for f in files if f))


def _is_dbt_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return (
        path.endswith(".sql")
        or parts[-1:] == ("dbt_project.yml",)
        or bool(DBT_DIRS.intersection(parts[:-1]))
    )


def inference_order(event: UniversalFailureEvent, repo: Path) -> list[str]:
    """Harness names to try for `event`, most fitting first (rules 2 and 3 above)."""
    order = list(BY_PLATFORM.get(event.source, ()))
    if event.source is FailureSource.AIRFLOW:
        files = changed_files(event, repo)
        in_dags = any("dags" in PurePosixPath(f).parts[:-1] for f in files)
        if files and not in_dags and all(_is_dbt_file(f) for f in files):
            order = ["dbt", *(name for name in order if name != "dbt")]
    return order


def select_harness(
    event: UniversalFailureEvent,
    repo: Path,
    harnesses: list[Harness],
    override: str | None = None,
    config: SandboxConfig | None = None,
) -> Harness:
    """The harness named by `override` (else by `config.harness`, else by the repo's
    `.patchit.toml`), else the one the inference picks among those that apply."""
    if override is None:
        override = (config or load_config(repo).sandbox).harness
    if override:
        for harness in harnesses:
            if harness.name == override:
                return harness
        known = ", ".join(sorted(h.name for h in harnesses)) or "none installed"
        raise BadInputError(
            f"harness {override!r} is not installed (known: {known}); "
            "fix `harness` in the [sandbox] section of .patchit.toml"
        )
    by_name = {h.name: h for h in harnesses}
    for name in inference_order(event, repo):
        inferred = by_name.get(name)
        if inferred is not None and inferred.applies_to(event, repo):
            return inferred
    for harness in harnesses:
        if harness.applies_to(event, repo):
            return harness
    raise HarnessError(
        f"{event.short()}: no installed harness can re-run this unit; set `harness` in config"
    )


def configure_harnesses(harnesses: list[Harness], config: PatchitConfig) -> list[Harness]:
    """Give each harness the repo's settings (`Harness.configure`); returns the list."""
    for harness in harnesses:
        harness.configure(config)
    return harnesses
