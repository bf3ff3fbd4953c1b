"""What the dbt harness selects, replays and judges: pure functions of the event and of dbt's
run results, apart from the harness's process handling (`harnesses/dbt/harness.py`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from patchit.events.model import UniversalFailureEvent
from patchit.evidence.redact import MASK
from patchit.harnesses.dbt.warehouse_gate import WarehouseCut
from patchit.sandbox.pg_clone import Clone

OUTPUT_TAIL_LINES = 60
# dbt itself treats warn and no-op as non-failing; so does verification
PASSING_STATUSES = frozenset({"pass", "success", "warn", "no-op"})
NODE_TYPES = ("model", "seed", "snapshot", "test", "unit_test", "source", "exposure", "analysis")
# The sandbox sets these itself; replaying the user's would point dbt back at the user's files.
_NOT_REPLAYED = frozenset(
    {"DBT_PROFILES_DIR", "DBT_PROJECT_DIR", "DBT_TARGET_PATH", "DBT_LOG_PATH", "DBT_STATE",
     "DBT_DEFER_STATE", "DBT_DEFER", "DBT_FAVOR_STATE", "DBT_TARGET", "DBT_PROFILE",
     "DBT_PARTIAL_PARSE_FILE_PATH", "DBT_PARTIAL_PARSE_FILE_DIFF"}
)  # fmt: skip
_SANDBOX_ENV = {
    "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    "DBT_USE_COLORS": "false",
    "DBT_PRINTER_WIDTH": "120",
}


# The nodes a sandbox run must build before the unit: names, or FRESH (no warehouse yet:
# everything upstream of what the run builds). Past MAX_UNBUILT_SELECTORS names, saying
# "everything upstream" is shorter, and only rebuilds relations that exist already.
Unbuilt = tuple[str, ...]
FRESH: Final[Unbuilt] = ("<fresh warehouse>",)
MAX_UNBUILT_SELECTORS = 40


@dataclass
class DbtSandbox:
    """One prepared run: dbt's arguments, where it runs, and its partial-parse bookkeeping."""

    args: list[str]
    cwd: Path
    log_path: Path
    target_dir: Path
    parse_key: str
    project_dir: Path
    user_parse_file: Path | None = None
    env: dict[str, str] = field(default_factory=dict)  # on top of the run's environment
    pg_schema: str | None = None  # a Postgres target's sandbox schema: guard the build
    pg_notes: list[str] = field(default_factory=list)  # the user's tables it was seeded with
    pg_role: str | None = None  # the restricted role the run logs in as (`sandbox.pg_role`)
    pg_clone: Clone | None = None  # the incident's database (Postgres): a copy, or the user's
    sf_database: str | None = None  # patchit's own Snowflake database the run built in
    snowflake: bool = False  # `pg_schema` is a Snowflake sandbox schema (`harnesses.dbt_sf`)
    state_manifest: Path | None = None  # the failing run's manifest, as `--state` reads it
    spent_ms: dict[str, float] = field(default_factory=dict)  # parts of preparing it, timed
    # a DuckDB warehouse cut as the relations the run reads (`slice`): the snapshot it was cut
    # from and where the copy is, for the whole copy a "Catalog Error" run is retried on
    warehouse_slice: Path | None = None
    db_copy: Path | None = None
    duckdb_note: str = ""  # what the isolation line says of a DuckDB warehouse
    # the DuckDB warehouse placed while the run starts (`warehouse_gate`): how to place it,
    # then the cut going on; each gives (the snapshot when a slice, the isolation note), which
    # `preparation.settle_warehouse` puts in the three fields above once the run is over
    place_warehouse: Callable[[], tuple[Path | None, str]] | None = None
    cut: WarehouseCut[tuple[Path | None, str]] | None = None
    # the root project's files that differ from the failing run's parse, when known: the run
    # takes the others from that parse (`tuning_files`)
    changed_files: tuple[str, ...] | None = None
    # the worktree's files git knows to be as committed (`clean_files.clean_blobs`), when read
    clean_files: dict[str, str] | None = None


@dataclass
class DbtOutcome:
    """What one dbt invocation did, however it was run."""

    success: bool
    exception: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    timed_out: bool = False
    parse_mode: str | None = None  # a warm run's "partial"/"full" (else read from dbt's log)
    saved_parse_kept: bool = False  # a warm run started from the worker's decoded parse
    files_from_saved: bool = False  # and took the root project's files from it (tuning_files)
    graph_from_saved: bool = False  # and the graph the worker linked from it (tuning_graph)
    phases_ms: dict[str, float] = field(default_factory=dict)  # a warm run's (dbt_phases)
    duration_ms: int | None = None  # a warm run's own, as its fork timed it


def node_selector(unique_id: str) -> str | None:
    """`model.shop.orders` -> `orders`; a test's trailing hash is dropped; None if not a node."""
    parts = unique_id.split(".")
    if len(parts) < 3 or parts[0] not in NODE_TYPES:
        return None
    if parts[0] == "test":
        return parts[2]
    if parts[0] == "source":
        return "source:" + ".".join(parts[2:])
    return ".".join(parts[2:])


def yaml_unit_path(unit_id: str) -> str | None:
    """`file:models/schema.yml` (a YAML file's unit, project-relative) -> its path; None for
    anything else, or a path a dbt selector cannot hold."""
    path = unit_id.removeprefix("file:")
    if path == unit_id or not path.endswith((".yml", ".yaml")):
        return None
    if any(c in path for c in " ,+*?[@:") or path.startswith(("/", "..")):
        return None
    return path


def select_units(
    event: UniversalFailureEvent,
    with_state: bool,
    unbuilt: Unbuilt = (),
    changed: tuple[str, ...] = (),
    tested: Mapping[str, str] | None = None,
) -> list[str]:
    """The failed unit and the incident's related units, each with its descendants (a YAML
    file's: the nodes it describes and their tests, `path:<file>+`); and the
    ancestors of those that the sandbox's warehouse lacks (`unbuilt`: their names, or `FRESH`
    when there is no warehouse at all), which dbt builds first in the same run. What the
    candidate changed is added with its descendants: by name (`changed`, see dbt_changes),
    or with `with_state` by dbt's `state:modified+`. A failed test's model (`tested`: a test's
    unique id or name -> its model, from the failing run's manifest) is selected with its
    descendants: the failing run skipped them, and a candidate must not pass unseen by them
    (a rename completed in the test but not in the models that read the column)."""
    unit_ids = [event.unit_id, *(event.context.get("related_units") or [])]
    unit_ids += list(event.context.get("units_before_renames") or [])
    selectors: list[str] = []

    def add(selector: str) -> None:
        if selector not in selectors:
            selectors.append(selector)

    for unit_id in unit_ids:
        model = (tested or {}).get(str(unit_id)) or (tested or {}).get(
            str(node_selector(str(unit_id))))  # fmt: skip
        if model is not None and str(unit_id).startswith("test."):
            add(f"{model}+")
        if str(unit_id) in (event.context.get("units_before_renames") or []):
            continue  # only its model: under its old name the test is no node any more
        selector = node_selector(str(unit_id))
        if not selector:
            yaml = yaml_unit_path(str(unit_id))
            if not yaml:
                continue
            # what the file describes (dbt's `path:` matches a model's properties file too)
            # and its tests, downstream: `state:modified` does not see a column's
            # description or an emptied test list, and would select nothing
            selector = f"path:{yaml}"
        add(f"{selector}+")
        if unbuilt is FRESH or len(unbuilt) > MAX_UNBUILT_SELECTORS:
            add(f"@{selector}")
        else:  # `@`: the unit, its descendants and their ancestors; `,`: intersection
            for name in unbuilt:
                add(f"@{selector},{name}")
    for name in changed:
        add(f"{name}+")
    if with_state:
        selectors.append("state:modified+")
    return selectors


def unbuilt_nodes(names: Iterable[str], relations: set[str] | None) -> Unbuilt:
    """The project's node names with no relation in the warehouse (DuckDB folds identifier
    case), sorted; `FRESH` when there is no warehouse (`relations` None). A name with an alias
    or an ephemeral model is listed too: selecting it costs a rebuild, never a wrong verdict."""
    if relations is None:
        return FRESH
    have = {r.lower() for r in relations}
    return tuple(sorted({n for n in names if n.lower() not in have}))


def incident_units(event: UniversalFailureEvent) -> list[str]:
    """The failed unit and the incident's related units (`related_units`), each once."""
    related = [str(u) for u in event.context.get("related_units") or []]
    return list(dict.fromkeys([event.unit_id, *related]))


def judge_outcome(
    outcome: DbtOutcome, unit_id: str, related: Iterable[str] = ()
) -> tuple[bool, list[str]]:
    """Pass iff dbt succeeded, every result passed, and every failed unit of the incident (the
    unit and its `related` units) ran: a fix for one of two failing models is no fix."""
    passed, failures, _ = judge_with_known(outcome, unit_id, related)
    return passed, failures


def judge_with_known(
    outcome: DbtOutcome, unit_id: str, related: Iterable[str] = (), known: Iterable[str] = ()
) -> tuple[bool, list[str], list[str]]:
    """`judge_outcome`, with the nodes in `known` (outside the incident, failing on this line
    before the candidate, which does not edit them: `known_failing`) set aside when they fail
    again, and what they skipped when nothing else failed: (passed, failures, set aside). A
    node downstream of the incident that another breaking change broke (its fix on another
    branch) must not refuse a right fix of this one; every unit of the incident must still
    run and pass."""
    units = list(dict.fromkeys([unit_id, *related]))
    unit_names = {node_selector(u) for u in units if u.startswith("test.")}
    known_ids = set(known) - set(units)
    failures: list[str] = []
    set_aside: list[str] = []
    skipped: list[str] = []
    for result in outcome.results:
        uid, status = str(result.get("unique_id")), str(result.get("status"))
        if status in PASSING_STATUSES:
            continue
        ours = uid in units or (uid.startswith("test.") and node_selector(uid) in unit_names)
        if not ours and uid in known_ids:
            set_aside.append(uid)
        elif not ours and status == "skipped":
            skipped.append(uid)
        else:
            failures.append(uid)
    if failures or not set_aside:  # skipped for what failed here, or with nothing set aside
        failures += skipped
    else:
        set_aside += skipped
    ran = {str(r.get("unique_id")) for r in outcome.results}
    # a test is known by its name: a candidate that renames its column gives it a new hash
    tests = {node_selector(r) for r in ran if r.startswith("test.")}
    for unit in units:
        found = unit in ran or (unit.startswith("test.") and node_selector(unit) in tests)
        if node_selector(unit) and not found and unit not in failures:
            failures.append(unit)
    succeeded = outcome.success or (bool(set_aside) and not outcome.exception)
    passed = succeeded and not outcome.timed_out and not failures and bool(outcome.results)
    return passed, failures, set_aside


def unit_verdicts(outcome: DbtOutcome, units: Iterable[str], passed: bool) -> dict[str, str]:
    """Each unit of the incident and how it ended in this run: dbt's status, `not run`; a unit
    that is no node (a YAML file that failed to parse) by the run as a whole."""
    status = {str(r.get("unique_id")): str(r.get("status")) for r in outcome.results}
    # a test is known by its name: a candidate that renames its column gives it a new hash
    by_name = {node_selector(u): s for u, s in status.items() if u.startswith("test.")}
    verdicts = {}
    for unit in units:
        if node_selector(unit):
            verdicts[unit] = status.get(unit) or (
                by_name.get(node_selector(unit), "not run") if unit.startswith("test.")
                else "not run")  # fmt: skip
        else:
            verdicts[unit] = "pass" if passed else "error"
    return verdicts


def replay_env(event: UniversalFailureEvent) -> dict[str, str]:
    """The DBT_* variables of the failing run, minus paths the sandbox owns; redacted values
    come from patchit's own environment when it has them, else they are left out."""
    env: dict[str, str] = {}
    for name, value in (event.dbt.env if event.dbt else {}).items():
        if name in _NOT_REPLAYED:
            continue
        if value == MASK:
            if name not in os.environ:
                continue
            value = os.environ[name]
        env[name] = value
    return {**env, **_SANDBOX_ENV}


def tail_lines(path: Path, lines: int = OUTPUT_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
