"""Nodes failing on this line before the candidate: what a verification may set aside.

A candidate is verified with what runs downstream of the incident's units. A node down there
that was already failing on the failing commit's line (another breaking change broke it, and
its fix waits on another branch; a model the project has left broken) would fail again and
refuse a right fix of this incident. The dbt harness sets these nodes aside when they fail
again and the candidate does not edit them (`harnesses.dbt.units.judge_with_known`), and says
so; every unit of the incident must still run and pass. Memory's record of each node's runs
(`unit_runs`, written by the wrapper before it heals) says which nodes those are: the last
recorded run of the node failed, at the failing commit or an ancestor of it.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.gitlog import is_on_line
from patchit.harnesses.dbt.units import node_selector
from patchit.memory import Memory

MAX_KNOWN = 500  # a project that is mostly red gets no benefit of the doubt


def known_failing(memory: Memory, event: UniversalFailureEvent, units: list[str]) -> list[str]:
    """The dbt nodes of `event`'s repository, outside `units`, whose last recorded run failed
    at the failing commit or one of its ancestors, sorted."""
    if event.source is not FailureSource.DBT or not event.repo_path or not event.commit:
        return []
    latest = {run.unit_id: run for run in memory.latest_unit_runs(event.repo_path)}
    ours = set(units)
    repo, lines = Path(event.repo_path), dict[str, bool]()
    found = []
    for unit, run in latest.items():
        if run.passed or unit in ours:
            continue
        if run.commit not in lines:
            lines[run.commit] = is_on_line(repo, run.commit, event.commit)
        if lines[run.commit]:
            found.append(unit)
    return sorted(found) if len(found) <= MAX_KNOWN else []


def for_candidate(event: UniversalFailureEvent, files: list[str]) -> UniversalFailureEvent:
    """`event` without the known failing nodes the candidate edits (a model's file, by its
    name): a node the candidate touched is judged like any other."""
    known = [str(u) for u in event.context.get("known_failing") or []]
    if not known:
        return event
    edited = {PurePosixPath(f).stem for f in files}
    kept = [u for u in known if node_selector(u) not in edited]
    if kept == known:
        return event
    return event.model_copy(update={"context": {**event.context, "known_failing": kept}})


def with_known_failing(memory: Memory, event: UniversalFailureEvent) -> UniversalFailureEvent:
    """`event` with `context["known_failing"]` (see `known_failing`) when there are any."""
    units = [event.unit_id, *(str(u) for u in event.context.get("related_units") or [])]
    known = known_failing(memory, event, units)
    if not known:
        return event
    return event.model_copy(update={"context": {**event.context, "known_failing": known}})
