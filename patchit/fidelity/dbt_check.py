"""The dbt data check: relations built by the baseline and the candidate, compared and judged.

Compared: every model/seed/snapshot either run built (the failed node, its descendants, and
what `state:modified+` added). A difference in a relation is
- unstable: the same column also differs between two runs of the baseline (excluded);
- meant: the relation's model file is in the breaking diff and the column is one the diff's
  kept lines name (see `meant`), or the kept lines change the relation as a whole; or a
  column the change renamed, holding the old column's very values under the new name (a
  model that passes it on with `select *`);
- propagated: the relation's compiled SQL is the same in both runs, and every compared parent
  that differs is itself meant or propagated: with the same code and inputs that differ only
  where meant, its differences can only come from the meant ones;
- unstable too: the candidate edits only dbt code (SQL, YAML), the relation's compiled SQL
  and config (no hooks) are the same in both runs and no compared parent differs: the
  same code over the same inputs, so the difference is the run's own (ties, float sums in
  another order, now()), not the candidate's;
- unexpected: anything else. One unexpected relation makes the check `needs_review`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from patchit.errors import HarnessError
from patchit.fidelity.dbt_data import RawDiff, WarehouseDiff
from patchit.fidelity.meant import ALL, Meant
from patchit.fidelity.model import OutputDiff
from patchit.fidelity.outputs import BuiltNode, DbtOutputs
from patchit.harnesses.dbt.slice import fill_slice

ROWS = "(row count)"
# files whose effect on a relation shows in its compiled SQL or config
CODE_SUFFIXES = frozenset({".sql", ".yml", ".yaml", ".md", ".jinja", ".jinja2"})


class Diff(Protocol):
    def compare(self, schema: str, name: str, base_name: str | None = None) -> RawDiff: ...

    def sample(self, diff: RawDiff, differing: list[str]) -> str: ...

    def close(self) -> None: ...


def open_diff(base: DbtOutputs, cand: DbtOutputs) -> Diff:
    """The two runs' relations side by side: two DuckDB files attached read-only, or two
    sandbox schemas of one Postgres or Snowflake database."""
    if base.duckdb is not None and cand.duckdb is not None:
        return WarehouseDiff(base.duckdb, cand.duckdb)
    if base.sf_output and base.pg_schema and cand.pg_schema:
        from patchit.fidelity.sf_data import SfWarehouseDiff

        return SfWarehouseDiff(base.sf_output, base.pg_schema, cand.pg_schema)
    if base.pg_output and base.pg_schema and cand.pg_schema:
        from patchit.fidelity.pg_data import PgWarehouseDiff
        from patchit.sandbox.postgres import dbname_of

        if cand.pg_output is not None and dbname_of(cand.pg_output) != dbname_of(base.pg_output):
            raise HarnessError(
                f"the two runs' schemas are in databases {dbname_of(base.pg_output)} and "
                f"{dbname_of(cand.pg_output)}: Postgres compares inside one"
            )

        return PgWarehouseDiff(base.pg_output, base.pg_schema, cand.pg_schema)
    raise HarnessError("the two runs' outputs are not in one kind of warehouse")


@dataclass
class Compared:
    node: BuiltNode
    base_node: BuiltNode | None
    cand_node: BuiltNode | None
    raw: RawDiff
    renamed_from: str | None = None  # the baseline's name of a model the change renamed


def renamed_nodes(base: DbtOutputs, cand: DbtOutputs, renamed: dict[str, str]) -> dict[str, str]:
    """candidate uid -> baseline uid of each model the change renamed (its file renamed, old
    path -> new path): only the baseline built the old, only the candidate the new."""
    new_path = {old: new for old, new in renamed.items()}
    by_file = {n.file: uid for uid, n in cand.nodes.items() if n.file and uid not in base.nodes}
    pairs: dict[str, str] = {}
    for uid, node in base.nodes.items():
        if uid in cand.nodes or not node.file or node.file not in new_path:
            continue
        if (cand_uid := by_file.get(new_path[node.file])) is not None:
            pairs[cand_uid] = uid
    return pairs


def compare_runs(
    base: DbtOutputs, cand: DbtOutputs, renamed: dict[str, str] | None = None
) -> dict[str, Compared]:
    """Every relation either run built, compared in the warehouse; a model the change
    renamed (`renamed`: old file -> new file) is compared with its old relation, not called
    missing on each side."""
    found: dict[str, Compared] = {}
    pairs = renamed_nodes(base, cand, renamed or {})
    _fill_slices(base, cand)
    wh = open_diff(base, cand)
    try:
        for uid in sorted((base.nodes.keys() | cand.nodes.keys()) - set(pairs.values())):
            node = cand.nodes.get(uid) or base.nodes[uid]
            base_node = base.nodes.get(pairs.get(uid, uid))
            old_name = base_node.name if base_node is not None and uid in pairs else None
            raw = wh.compare(node.schema, node.name, old_name)
            found[uid] = Compared(node, base_node, cand.nodes.get(uid), raw, old_name)
    finally:
        wh.close()
    return found


def _fill_slices(base: DbtOutputs, cand: DbtOutputs) -> None:
    """A run on a slice of the warehouse (`slice`) lacks what it neither read nor built; a
    relation the other run built is compared with the user's, as on a whole copy."""
    relations = [(n.schema, n.name) for n in [*base.nodes.values(), *cand.nodes.values()]]
    for side in (base, cand):
        if side.duckdb is None or side.slice_of is None:
            continue
        import duckdb

        try:
            fill_slice(side.duckdb, side.slice_of, relations)
        except duckdb.Error as exc:
            raise HarnessError(f"{side.duckdb}: cannot fill the run's slice: {exc}") from exc


def unstable_columns(first: DbtOutputs, second: DbtOutputs, uids: list[str]) -> dict[str, set[str]]:
    """Columns two runs of the baseline disagree on (all columns when their rows differ)."""
    found: dict[str, set[str]] = {}
    wh = open_diff(first, second)
    try:
        for uid in uids:
            node = first.nodes.get(uid) or second.nodes.get(uid)
            if node is None:
                continue
            raw = wh.compare(node.schema, node.name)
            cols = set(raw.differing)
            if raw.base and raw.cand and raw.base.rows != raw.cand.rows:
                cols |= raw.columns() | {ROWS}
            if cols:
                found[uid] = cols
    finally:
        wh.close()
    return found


def _schema_column(change: str) -> str:
    return change[1:].split(" ", 1)[0]


def edits_only_code(added: dict[str, list[str]]) -> bool:
    """Whether every file the candidate edits is dbt code or config whose effect shows in a
    node's compiled SQL or config (SQL, YAML, docs), so that a relation with the same SQL and
    config as the baseline's reads what the baseline's read: not a data file a model reads
    by path, nor Python."""
    return all(
        PurePosixPath(path).suffix.lower() in CODE_SUFFIXES
        and PurePosixPath(path).name != "dbt_project.yml"  # the project's run hooks live there
        for path in added
    )


def has_run_hooks(project_dir: Path) -> bool:
    """Whether the project runs hooks of its own around a run (`on-run-start`/`on-run-end`):
    SQL no node's compiled code shows, which could change what models read."""
    try:
        text = (project_dir / "dbt_project.yml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # unknown: assume it may
    return "on-run-start" in text or "on-run-end" in text


def judge(
    compared: dict[str, Compared],
    unstable: dict[str, set[str]],
    meant: Meant,
    code_only: bool = False,
) -> tuple[list[OutputDiff], dict[str, list[str]]]:
    """Verdicts, judged and listed parents first; returns the diffs and meant-to-differ.
    `code_only`: the candidate edits only dbt code (`edits_only_code`), so a relation built
    from the same SQL and config over the same inputs is judged the run's own difference."""
    verdicts: dict[str, OutputDiff] = {}
    meant_map: dict[str, list[str]] = {}

    def visit(uid: str) -> OutputDiff:
        if uid in verdicts:
            return verdicts[uid]
        item = compared[uid]
        parents = [visit(p) for p in item.node.parents if p in compared]
        out = _judge_one(item, unstable.get(uid, set()), meant, meant_map, parents, code_only)
        verdicts[uid] = out
        return out

    for uid in compared:
        visit(uid)
    return list(verdicts.values()), meant_map  # parents first: the patched node leads


def _judge_one(
    item: Compared,
    unstable: set[str],
    meant: Meant,
    meant_map: dict[str, list[str]],
    parents: list[OutputDiff],
    code_only: bool,
) -> OutputDiff:
    raw = item.raw
    out = OutputDiff(kind="relation", name=raw.label, unique_id=item.node.unique_id)
    out.rows_baseline = raw.base.rows if raw.base else None
    out.rows_candidate = raw.cand.rows if raw.cand else None
    out.missing_in = "baseline" if raw.base is None else "candidate" if raw.cand is None else None
    out.renamed_from = item.renamed_from
    out.schema_changes = list(raw.schema_changes)
    out.differing = list(raw.differing)
    meant_cols = meant.columns(item.node.file, raw.columns()) if item.node.file else []
    if item.renamed_from is None and item.node.file in meant.renamed.values():
        meant_cols = [ALL]  # renamed by the change, its old relation not built: new, as meant
    # a column the change renamed, carried on unchanged under its new name (a model that
    # selects `*` from the renamed one): the rename's own difference
    meant_cols = meant_cols + sorted(
        c for new, old in raw.renamed.items() if meant.renames_column(old, new) for c in (new, old)
    )
    if meant_cols:
        meant_map[raw.label] = meant_cols
    # a column the change renamed (its kept lines name the new one) holding its old values
    out.renamed = [
        f"{old} -> {new}"
        for new, old in sorted(raw.renamed.items())
        if ALL in meant_cols or new.lower() in {c.lower() for c in meant_cols}
    ]
    if not raw.differs:
        return out
    changed = [c for c in raw.differing if c not in unstable]
    changed += [_schema_column(s) for s in raw.schema_changes]
    if out.rows_baseline != out.rows_candidate and ROWS not in unstable:
        changed.append(ROWS)
    if out.missing_in:
        changed.append(f"(missing in {out.missing_in})")
    out.unstable = sorted(c for c in raw.differing if c in unstable)
    if not changed:
        out.verdict = "unstable"
        return out
    if ALL in meant_cols:
        out.meant, out.verdict = changed, "meant"
        return out
    out.meant = [c for c in changed if c in meant_cols]
    unexpected = [c for c in changed if c not in meant_cols]
    if not unexpected:
        out.verdict = "meant"
        return out
    differing_parents = [p for p in parents if p.verdict not in ("same", "unstable")]
    same_code = _same_code(item)
    if (
        same_code
        and differing_parents
        and all(p.verdict in ("meant", "propagated") for p in differing_parents)
    ):
        out.verdict = "propagated"
        return out
    same_inputs = code_only and not differing_parents and not _hooked(item)
    if same_code and same_inputs and not raw.schema_changes and not out.missing_in:
        # the same SQL and config over the same inputs: a difference only the run itself makes
        # (ties in a window or a `limit`, float sums in another order, now() or random())
        out.unstable, out.nondeterministic, out.verdict = sorted(changed), True, "unstable"
        return out
    out.unexpected, out.verdict = unexpected, "unexpected"
    return out


def _same_code(item: Compared) -> bool:
    """Both runs built the relation from the same compiled SQL and the same config."""
    base, cand = item.base_node, item.cand_node
    return (
        base is not None
        and cand is not None
        and bool(cand.compiled_code)
        and base.compiled_code == cand.compiled_code
        and base.config == cand.config
    )


def _hooked(item: Compared) -> bool:
    """Whether the relation's build runs hooks: SQL (a macro's, perhaps one the candidate
    edits) that its compiled code does not show."""
    node = item.cand_node or item.base_node
    return node is not None and ('"pre_hook"' in node.config or '"post_hook"' in node.config)


def add_samples(base: DbtOutputs, cand: DbtOutputs, diffs: list[OutputDiff]) -> None:
    """A bounded sample of differing rows for each unexpected relation, from the warehouse."""
    wanted = [
        d for d in diffs if d.verdict == "unexpected" and not d.missing_in and not d.renamed_from
    ]
    if not wanted:
        return
    wh = open_diff(base, cand)
    try:
        for diff in wanted:
            schema, name = diff.name.split(".", 1)
            raw = wh.compare(schema, name)
            cols = [c for c in diff.unexpected if c in raw.differing]
            if not cols and ROWS in diff.unexpected:
                cols = [c for c in raw.columns() if c not in diff.unstable]
            diff.sample = wh.sample(raw, cols)
    finally:
        wh.close()
