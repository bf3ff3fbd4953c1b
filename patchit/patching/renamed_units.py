"""The failed unit as a candidate that follows a rename leaves it.

dbt names a generic test after its model and column (`accepted_values_stg_orders_status__
placed__shipped`); a candidate that follows the change's rename of `status` to `order_status`
into the model's YAML turns that test into `accepted_values_stg_orders_order_status__...`,
and the test that failed no longer exists under its old name. Verification must then run
and judge the renamed test, not refuse the candidate because the old one did not run (nor
accept a candidate that merely made a test disappear: the renamed test must run and pass).

The new name is the failing test's node renamed, not its name edited: with the failing run's
manifest, the test's model, kind (`dbt_utils.expression_is_true`) and arguments are read, the
renames applied to the arguments as whole names (`order_total - tax_paid = subtotal`), and the
name synthesised as dbt does. Editing the name would rename `subtotal` inside
`order_items_subtotal` too. Without a manifest, or for a test dbt did not name that way, the
name's underscore-bounded words are renamed instead.

The renames are the ones the candidate declares (`follows`) and the names its YAML edits
change (a column fix-it that renames one name in a test's expression declares none).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from patchit.events.model import UniversalFailureEvent
from patchit.patching.base import PatchCandidate

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\S")
_YAML = (".yml", ".yaml")


def candidate_renames(candidate: PatchCandidate) -> dict[str, str]:
    """The renames a candidate makes, for the tests named after what it renames: the ones it
    declares, then each name its YAML edits replace by another in the same place (an edit
    whose texts differ in more than names tells none)."""
    renames = dict(candidate.follows)
    for edit in candidate.edits:
        if not edit.path.endswith(_YAML) or not edit.search:
            continue
        before, after = _TOKEN.findall(edit.search), _TOKEN.findall(edit.replace)
        if len(before) != len(after):
            continue
        pairs = {(a, b) for a, b in zip(before, after, strict=True) if a != b}
        if all(_NAME.fullmatch(a) and _NAME.fullmatch(b) for a, b in pairs):
            for old, new in pairs:
                renames.setdefault(old, new)
    return renames


def _synthesised(test_type: str, target: str, args: Mapping[str, Any]) -> str:
    """dbt's full generic test name (the one in the unique id), as
    `dbt.parser.generic_test_builders.synthesize_generic_test_names` makes it."""
    flat: list[str] = []
    for name in sorted(args):
        if name == "model":
            continue
        value = args[name]
        parts = list(value.values()) if isinstance(value, dict) else (
            list(value) if isinstance(value, list | tuple) else [value])  # fmt: skip
        flat.extend(str(p) for p in parts)
    unique = "__".join(re.sub("[^0-9a-zA-Z_]+", "_", arg) for arg in flat)
    return f"{test_type}_{target}_{unique}"


def _renamed(value: Any, renames: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _NAME.sub(lambda m: renames.get(m.group(0), m.group(0)), value)
    if isinstance(value, list | tuple):
        return [_renamed(v, renames) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v, renames) for k, v in value.items()}
    return value


@lru_cache(maxsize=2)
def _tests_of(path: str, mtime_ns: int) -> dict[str, dict[str, Any]]:
    try:
        nodes = json.loads(Path(path).read_text(encoding="utf-8")).get("nodes") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return {k: v for k, v in nodes.items() if k.startswith("test.") and isinstance(v, dict)}


def manifest_tests(path: str | None) -> dict[str, dict[str, Any]]:
    """The test nodes of a run's manifest by unique id ({} without one)."""
    if not path:
        return {}
    try:
        return _tests_of(path, Path(path).stat().st_mtime_ns)
    except OSError:
        return {}


def node_renamed(node: Mapping[str, Any], renames: Mapping[str, str]) -> str | None:
    """The full name of the generic test `node` once `renames` apply to its model and its
    arguments; None when it is no generic test of a model, or dbt did not name it from them
    (a custom `name:`)."""
    meta = node.get("test_metadata")
    attached = str(node.get("attached_node") or "")
    if not isinstance(meta, dict) or not attached.startswith("model.") or node.get("version"):
        return None
    kwargs = meta.get("kwargs") or {}
    test_type = f"{meta['namespace']}_{meta['name']}" if meta.get("namespace") else meta["name"]
    target = attached.split(".")[-1]
    if not isinstance(kwargs, dict) or _synthesised(test_type, target, kwargs) != node.get("name"):
        return None
    return _synthesised(test_type, renames.get(target, target), _renamed(kwargs, renames))


def followed_unit(
    unit_id: str, follows: Mapping[str, str], tests: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    """A generic dbt test's unique id as the renames leave it (its trailing hash dropped: dbt
    computes a new one); any other unit id as it is: a singular test is named by its file,
    which no rename moves (found on Saurabh-DS/datavault-dbt-duckdb-medallion: the right
    candidate was judged on `assert_claim_amount_gbp_within_vehicle_value`, a test that does
    not exist, and refused). `tests`: the failing run's test nodes."""
    parts = unit_id.split(".")
    if len(parts) < 4 or parts[0] != "test" or not follows:
        return unit_id  # a singular test (`test.project.name`, no hash) is named by its file
    node = (tests or {}).get(unit_id)
    if node is not None and not node.get("test_metadata"):
        return unit_id
    name = node_renamed(node, follows) if node is not None else None
    if name is None:
        name = parts[2]
        for old, new in follows.items():
            name = re.sub(rf"(?<=_){re.escape(old)}(?=_|$)", new, name, flags=re.IGNORECASE)
    return unit_id if name == parts[2] else ".".join([*parts[:2], name])


def followed_event(
    event: UniversalFailureEvent, follows: Mapping[str, str]
) -> UniversalFailureEvent:
    """`event` with its unit and related units as the candidate's renames leave them."""
    if not follows:
        return event
    units = [event.unit_id, *(str(u) for u in event.context.get("related_units") or [])]
    tests = manifest_tests(event.artifacts.get("manifest")) if any(
        u.startswith("test.") for u in units) else {}  # fmt: skip
    related = [
        followed_unit(str(u), follows, tests) for u in event.context.get("related_units") or []
    ]
    unit_id = followed_unit(event.unit_id, follows, tests)
    update: dict[str, object] = {"unit_id": unit_id}
    before = [u for u, f in zip(units, [unit_id, *related], strict=True) if u != f]
    if related or before:  # the harness selects a renamed test's model by its old id
        update["context"] = {**event.context, "related_units": related,
                             "units_before_renames": before}  # fmt: skip
    return event.model_copy(update=update)
