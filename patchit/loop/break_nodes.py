"""The nodes the breaking change edited, for a failing dbt run that built nothing.

A run that failed at parse time (a ref to a renamed model, a YAML error) wrote no manifest and
built no node, so the warehouse still holds what the last good run built. A candidate is
verified by building the failing unit and what the candidate changed: a model upstream of it
that the breaking change also edited (a column removed in an earlier, unmerged commit) would
be read as the last good run left it, and a fix that still fails against the new model would
pass. So the models and seeds the change edited are rebuilt too, with their descendants, as the
user's next `dbt build` will (`harnesses.dbt.preparation` adds them when the failing run left
no manifest)."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from patchit.events.model import UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.evidence.project_index import config_paths, read_project_config

CONTEXT_KEY = "break_nodes"
_MAX_NODES = 200  # beyond this the selection is left as it was (a sweeping change)
_NAME = re.compile(r"\w+")  # what dbt's selector syntax takes as one name


def break_node_names(evidence: Evidence) -> list[str]:
    """The models and seeds whose files the breaking change edited or added, by name, that
    exist at the failing commit (sorted)."""
    if evidence.project_dir is None:
        return []
    root = Path(evidence.repo_root)
    project = PurePosixPath(evidence.project_dir)
    config = read_project_config(root / project)
    kinds = (
        (config_paths(config, "model-paths", ["models"]), (".sql", ".py")),
        (config_paths(config, "seed-paths", ["seeds"]), (".csv",)),
    )
    names: set[str] = set()
    for changed in evidence.changed_files:
        path = PurePosixPath(changed)
        if not path.is_relative_to(project) or not (root / path).is_file():
            continue  # another project's, or deleted by the change
        rel = path.relative_to(project)
        for dirs, suffixes in kinds:
            in_dirs = any(rel.is_relative_to(d.strip("/")) for d in dirs if d.strip("/"))
            if in_dirs and rel.suffix.lower() in suffixes and _NAME.fullmatch(rel.stem):
                names.add(rel.stem)
    return sorted(names)


def with_break_nodes(event: UniversalFailureEvent, evidence: Evidence) -> UniversalFailureEvent:
    """`event` with `context["break_nodes"]` when it is a dbt failure whose run left no
    manifest (it built nothing) and the change edited models or seeds."""
    if event.dbt is None or event.artifacts.get("manifest"):
        return event
    names = break_node_names(evidence)
    if not names or len(names) > _MAX_NODES:
        return event
    return event.model_copy(update={"context": {**event.context, CONTEXT_KEY: names}})
