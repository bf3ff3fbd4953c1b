"""One incident per breaking change: which failed units of one run the same change broke.

One commit can fail several units of a run with different errors: a column renamed in a
staging model breaks two marts, one with "column not found", the other with another binder
error. Grouped by error text (`cause_key`) they became two incidents, whose two branches
contradicted each other. Here each unit's part of the breaking change is read first: the files
changed in the range (the last good commit, else the failing commit's parent, to the failing
commit) that the unit depends on or reads (`evidence.unit_files.dependency_files`). Units of
one pipeline whose parts share a file are one group, keyed by the commits that touched those
files and the files themselves (`memory.fingerprint.change_key`): the next run of the same
failure finds the incident again, and a failure on a new breaking commit gets a new key, so a
new incident, however alike its error text.

A unit the range does not touch (bad data, an upgrade outside the repo) keeps its cause key: it
joins the group of a unit failing with the same cause, else its cause's own group, as before.
So does a failure that reads as an outside cause (`intake.storm.storm_class`: an outage of
hundreds of tasks stays one incident), whatever the range touched. Where no last good commit
is known (the range is only the failing commit's own change), an untouched failure may come
from an earlier commit: the incident that already holds this failure (`known`) keeps it. And
the same failures at the same commit stay in the incident that holds them, whatever key it
was opened with (a run recorded open before its repository was known).

Grouping is a best guess and never fails a run: a unit whose change cannot be read (no git, a
commit the clone lacks, a root commit whose change is the whole tree) falls back to its cause
key.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from patchit.errors import PatchitError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.airflow import (
    collect_modules,
    dags_folder_of,
    find_task_callable,
    parse_module,
    read_repo_text,
)
from patchit.evidence.dbt import locate_project
from patchit.evidence.gitlog import change_base, changed_files, last_good_on_line
from patchit.evidence.model import Evidence
from patchit.evidence.pylog import parse_frames, repo_frames
from patchit.evidence.unit_files import dependency_files
from patchit.intake.storm import storm_class
from patchit.memory.fingerprint import cause_key, change_key
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git

LastGood = Callable[[UniversalFailureEvent], "str | None"]
# The key of the incident holding one of these failures already (at their commit, unless the
# flag says any commit), or None.
Known = Callable[[list[UniversalFailureEvent], bool], "str | None"]
_MODULES_BUDGET_CHARS = 1_000_000  # only the paths are kept: read every imported module


@dataclass(frozen=True)
class FailureGroup:
    """Failed units healed as one incident: the key it is found by, its units (the one to
    classify first), and the change that broke them (empty when grouped by cause)."""

    key: str
    events: list[UniversalFailureEvent]
    files: tuple[str, ...] = ()
    commits: tuple[str, ...] = ()

    def describe(self) -> str:
        names = list(dict.fromkeys(e.unit_id for e in self.events))
        units = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        if not self.files:
            return f"{len(self.events)} failed unit(s) of one cause: {units}"
        shas = ", ".join(c[:12] for c in self.commits) or "the failing commit"
        return (
            f"{len(self.events)} failed unit(s) broken by {shas} "
            f"({', '.join(self.files[:5])}): {units}"
        )


@dataclass(frozen=True)
class _Change:
    """One unit's part of the breaking change: the range and the files of it the unit reads."""

    repo: str
    base: str | None
    head: str
    pipeline: tuple[str, str]
    files: frozenset[str]

    @property
    def where(self) -> tuple[str, str | None, str, str, str]:
        """Units meet only in one range of one pipeline (one run)."""
        return (self.repo, self.base, self.head, *self.pipeline)


def group_failures(
    events: Iterable[UniversalFailureEvent],
    last_good: LastGood,
    known: Known = lambda _events, _any_commit: None,
) -> list[FailureGroup]:
    """The failed units of one run as incidents: by the change that broke them, else by
    cause; in the order the runs reported them, errors before failing data tests.
    `known(events, any_commit)`: the key of the incident that holds these failures already."""
    ordered = sorted(events, key=lambda e: e.status == "fail")  # stable: the run's order
    changes = _Changes(last_good)
    found = [changes.of(e) for e in ordered]
    parent = list(range(len(ordered)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    touched = [(i, c) for i, c in enumerate(found) if c is not None]
    first_reader: dict[tuple[object, ...], int] = {}  # (range, pipeline, file) -> a unit
    for i, change in touched:
        for path in change.files:
            j = first_reader.setdefault((*change.where, path), i)
            parent[root(i)] = root(j)
    members: dict[int, list[int]] = {}
    for i, _change in touched:
        members.setdefault(root(i), []).append(i)
    by_cause: dict[str, int] = {}  # a cause key -> the group its units join
    if len(touched) < len(ordered):  # only an untouched unit joins by cause
        for first, indices in members.items():
            for i in indices:
                by_cause.setdefault(cause_key(ordered[i]), first)
    keys: dict[str, str] = {}  # an untouched unit's cause key -> its group's key
    untouched: dict[int, str] = {}  # the first unit of a group by cause -> its key
    for i, unit_change in enumerate(found):
        if unit_change is not None:
            continue
        ck = cause_key(ordered[i])
        if ck not in by_cause and ck not in keys:
            keys[ck] = (known([ordered[i]], True) if changes.guessed(ordered[i]) else None) or ck
        key = ck if ck in by_cause else keys[ck]
        first = by_cause.setdefault(key, i)
        untouched.setdefault(first, key)
        members.setdefault(first, []).append(i)
    groups = []
    for first in sorted(members, key=lambda f: min(members[f])):
        indices = sorted(members[first])
        group_events = [ordered[i] for i in indices]
        if found[first] is None:
            groups.append(FailureGroup(untouched[first], group_events))
            continue
        group = changes.group(group_events, [found[i] for i in indices])
        # the same failures at the same commit, seen before (an earlier run, a run recorded
        # before its repository was known): their incident, whatever key it was opened with
        seen = known(group_events, False)
        groups.append(group if seen is None else replace(group, key=seen))
    return groups


def incident_key(
    event: UniversalFailureEvent,
    last_good: LastGood,
    known: Known = lambda _events, _any_commit: None,
) -> str:
    """The key of one failure's incident, as `group_failures` would give it alone."""
    return group_failures([event], last_good, known)[0].key


class _Changes:
    """Each unit's part of the breaking change, with git asked once per range."""

    def __init__(self, last_good: LastGood) -> None:
        self._last_good = last_good
        self._good: dict[str, str | None] = {}  # by event id
        self._changed: dict[tuple[str, str | None, str], list[str]] = {}
        self._base: dict[tuple[str, str | None, str], str | None] = {}
        self._projects: dict[tuple[str, str], Path] = {}

    def last_good(self, event: UniversalFailureEvent) -> str | None:
        if event.event_id not in self._good:
            self._good[event.event_id] = self._last_good(event)
        return self._good[event.event_id]

    def _project(self, event: UniversalFailureEvent, repo: Path) -> Path:
        """The dbt project of the event, found once per project the run names."""
        where = (str(repo), event.dbt.project_dir if event.dbt else "")
        if where not in self._projects:
            self._projects[where] = locate_project(event, repo)
        return self._projects[where]

    def guessed(self, event: UniversalFailureEvent) -> bool:
        """Whether the unit's range is only a guess (no last good commit is known): a failure
        it does not touch may come from an earlier commit."""
        if event.repo_path is None or event.commit is None or storm_class(event) is not None:
            return False
        return self.last_good(event) is None

    def of(self, event: UniversalFailureEvent) -> _Change | None:
        if event.repo_path is None or event.commit is None or storm_class(event) is not None:
            return None
        repo = Path(event.repo_path)
        try:
            good = (str(repo), self.last_good(event), event.commit)
            if good not in self._base:
                on_line = last_good_on_line(repo, good[1], event.commit)  # not another branch's
                self._base[good] = change_base(repo, on_line, event.commit)
            base = self._base[good]
            if base is None:  # a root commit: its change is the whole tree, no grouping by it
                return None
            where = (str(repo), base, event.commit)
            if where not in self._changed:
                self._changed[where] = changed_files(repo, base, event.commit)
            changed = self._changed[where]
            files = _unit_files(event, repo, changed, self._project, base) if changed else []
        except (PatchitError, OSError, ValueError):
            return None  # unreadable: its cause key groups it
        if not files:
            return None
        pipeline = (event.source.value, event.pipeline_id)
        return _Change(str(repo), base, event.commit, pipeline, frozenset(files))

    def group(
        self, events: list[UniversalFailureEvent], found: list[_Change | None]
    ) -> FailureGroup:
        changes = [c for c in found if c is not None]
        files = sorted(set().union(*(c.files for c in changes)))
        first = changes[0]
        try:
            commits = _commits(Path(first.repo), first.base, first.head, files)
        except PatchitError:
            commits = [first.head]
        key = change_key(events[0], commits, files)
        return FailureGroup(key, events, tuple(files), tuple(commits))


def _commits(repo: Path, base: str | None, head: str, files: list[str]) -> list[str]:
    """The commits of base..head that touched `files`."""
    out = run_git(repo, "log", "--format=%H", f"{base}..{head}", "--", *files,
                  timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
    return [line for line in out.split() if line] or [head]


def _unit_files(
    event: UniversalFailureEvent,
    repo: Path,
    changed: list[str],
    locate: Callable[[UniversalFailureEvent, Path], Path] = locate_project,
    base: str | None = None,
) -> list[str]:
    """The changed files the unit depends on or reads. For dbt, what the run's manifest says
    it reads; the project's other changed macros only when that is nothing (a macro renamed
    away no longer shows in the manifest), so that a change to one macro does not join every
    failing model of the project."""
    if event.source is FailureSource.DBT or event.dbt is not None:
        project = locate(event, repo)
        evidence = _evidence(event, repo_root=str(repo), unit_path=event.unit_path,
                             project_dir=os.path.relpath(project, repo))  # fmt: skip
        files = dependency_files(evidence, changed, every_macro=False) or dependency_files(
            evidence, changed
        )
        if files or not (event.unit_path or "").endswith(".sql"):
            return files
        # a unit the manifest does not know (a compile error): the refs of its code
        evidence.raw_code = read_repo_text(repo, event.unit_path or "")
        return dependency_files(evidence, changed)
    dag = _dag_rel(event)
    roots = [Path(p) for p in (event.repo_path, str(repo)) if p]
    frames = repo_frames(parse_frames(event.traceback or event.log_excerpt or ""), roots)
    starts = list(dict.fromkeys([*([dag] if dag else []), *(f.path for f in frames)]))
    search = [dags_folder_of(event, repo, dag), *([(repo / dag).parent] if dag else []), repo]
    modules = collect_modules(repo, starts, list(dict.fromkeys(search)), _MODULES_BUDGET_CHARS)
    evidence = _evidence(event, repo_root=str(repo), unit_path=dag,
                         related_code=dict.fromkeys(modules, ""), frames=frames)  # fmt: skip
    files = dependency_files(evidence, changed)
    head = event.commit
    if dag in files and base and head and _other_tasks_only(repo, base, head, dag, event.unit_id):
        files.remove(dag)  # the change in the DAG file is another task's: not this one's
    return files


def _other_tasks_only(repo: Path, base: str, head: str, dag: str, task_id: str) -> bool:
    """Whether every line the change touched in the DAG file lies in the callable of another
    task than `task_id` (a DAG file holds many tasks: a bug written into one is not the
    change of another that failed beside it). Lines at module level, in the DAG's function or
    in helpers count for every task."""
    diff = run_git(repo, "diff", "-U0", "--no-color", "--no-renames", base, head, "--", dag,
                   timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
    touched = _touched_lines(diff)
    source = run_git(repo, "show", f"{head}:{dag}", timeout_s=QUERY_TIMEOUT_S)
    own = find_task_callable(source, task_id)
    tasks = _task_functions(source)
    if not touched or own is None or own[0] not in tasks:
        return False
    others = [span for name, span in tasks.items() if name != own[0]]
    return all(any(first <= line <= last for first, last in others) for line in touched)


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def _touched_lines(diff: str) -> set[int]:
    """Lines of the new file a `-U0` diff added or rewrote; a pure deletion, the line it
    follows."""
    lines: set[int] = set()
    for found in _HUNK.finditer(diff):
        start, count = int(found[1]), int(found[2] if found[2] is not None else 1)
        lines.update(range(start, start + count) if count else [max(start, 1)])
    return lines


def _task_functions(source: str) -> dict[str, tuple[int, int]]:
    """The DAG file's task callables (a `@task...` function, or one a `python_callable=`
    names): name -> (first line, decorators included, last line)."""
    tree = parse_module(source)
    if tree is None:
        return {}
    named = {
        k.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for k in node.keywords
        if k.arg == "python_callable" and isinstance(k.value, ast.Name)
    }
    spans: dict[str, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if node.name in named or any("task" in ast.unparse(d) for d in node.decorator_list):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.setdefault(node.name, (first, node.end_lineno or node.lineno))
    return spans


def _evidence(event: UniversalFailureEvent, **fields: Any) -> Evidence:
    """A bare evidence bundle naming what `dependency_files` reads. Copied from one validated
    bundle, not validated per unit: validating re-redacts the event (it was when it came in),
    which costs milliseconds a unit for runs of hundreds of failed nodes."""
    return _bare_evidence(event.source).model_copy(update={"event": event, **fields})


@lru_cache(maxsize=8)
def _bare_evidence(source: FailureSource) -> Evidence:
    return Evidence(event=UniversalFailureEvent(source=source, pipeline_id="", unit_id=""),
                    repo_root="")  # fmt: skip


def _dag_rel(event: UniversalFailureEvent) -> str | None:
    """The DAG file, relative to the repository (as the Airflow evidence reads it)."""
    if event.unit_path:
        return event.unit_path
    dag_file = event.context.get("dag_file")
    if isinstance(dag_file, str) and event.repo_path:
        rel = os.path.relpath(os.path.normpath(dag_file), os.path.normpath(event.repo_path))
        return None if rel.startswith("..") else rel
    return None
