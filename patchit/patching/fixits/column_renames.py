"""Column renames the breaking change made in a model's output, read with sqlglot.

A staging model that selected `plan_code` and now selects `plan_code as plan_id` (or
`code as plan_code` that became `code as plan_id`, or `f(x) as old` that became `f(x) as
new`) renamed an output column: every consumer that reads the old name now fails. The rename
is read from the model's outermost select before (the last good commit, else the failing
commit's parent: `change_base`) and after the change: an output name gone, and exactly one
new output name computed by the same expression.

The outermost select is read through dbt's closing `select * from final` to the CTE it
passes on (`_final_select`). Nothing is read with doubt: an output whose expression holds
Jinja or whose name is quoted, or two gone names computed by one expression give no rename.
A `*` beside named outputs (`customers.*, ... end as customer_type`, the jaffle shop's marts)
leaves the outputs it brings unknown, so a rename is read there only between the named
outputs, and only when the change left the stars as they were; `outputs` itself, which callers
take as every output of a model, still gives None for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from patchit.errors import VcsError
from patchit.evidence.model import Evidence
from patchit.patching.fixits._common import model_files, package_model_files
from patchit.patching.fixits._sqlscope import is_star, masked, read_sql
from patchit.patching.renames import changed_texts
from patchit.patching.revert import change_base
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git


@dataclass(frozen=True)
class ColumnRename:
    """Model `model` (file `path`) outputs `new` where it output `old`; `before` is every
    output name it had before the change (lower case)."""

    model: str
    path: str
    old: str
    new: str
    before: frozenset[str]


@dataclass(frozen=True)
class _Output:
    expression: str
    doubtful: bool  # quoted name, Jinja in it: never followed


def outputs(text: str) -> dict[str, _Output] | None:
    """{output name (lower case): what computes it} of a model's outermost select; None when
    it does not parse, is not a plain select, or has a `*`."""
    named = _named_outputs(text)
    return named[0] if named is not None and not named[1] else None


def _named_outputs(text: str) -> tuple[dict[str, _Output], tuple[str, ...]] | None:
    """(the named outputs of a model's outermost select, its `*` projections as written); None
    when it does not parse or is not a plain select."""
    try:
        return _outputs_of(text)
    except RecursionError:  # parsed, but too deep for sqlglot's generator
        return None


def _outputs_of(text: str) -> tuple[dict[str, _Output], tuple[str, ...]] | None:
    reading = read_sql(text)
    if reading is None or not isinstance(reading.tree, exp.Select):
        return None
    select = _final_select(reading.tree)
    if select is None:
        return None
    found: dict[str, _Output] = {}
    stars: list[str] = []
    for projection in select.selects:
        if is_star(projection):
            stars.append(projection.sql(dialect="duckdb").lower())
            continue
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        names = [i for i in projection.find_all(exp.Identifier)]
        doubtful = any(i.quoted for i in names) or any(
            masked(i.name) for i in inner.find_all(exp.Identifier)
        )
        name = projection.alias_or_name.lower()
        if name in found:
            return None  # two outputs of one name: not a model dbt builds
        found[name] = _Output(inner.sql(dialect="duckdb").lower(), doubtful)
    return found, tuple(stars)


def _final_select(tree: exp.Select) -> exp.Select | None:
    """The select that names a model's outputs. dbt's style ends a model with `select * from
    final` (or `renamed`): that line passes one CTE's outputs on unchanged, so they are read
    from the CTE, through as many such lines as there are. A `*` over anything else (a join,
    a relation outside the file, `* exclude`) is not followed: None."""
    ctes = {cte.alias.lower(): cte.this for cte in tree.ctes}
    select: exp.Expr = tree
    for _ in range(len(ctes) + 1):
        if not isinstance(select, exp.Select):
            return None
        projections = select.selects
        if not (len(projections) == 1 and is_star(projections[0])):
            return select
        star = projections[0].this if isinstance(projections[0], exp.Column) else projections[0]
        source = select.args.get("from_") or select.args.get("from")
        table = source.this if isinstance(source, exp.From) else None
        plain = not any(star.args.get(k) for k in ("except_", "except", "replace", "rename"))
        if (
            not plain
            or select.args.get("joins")
            or select.args.get("group")
            or not isinstance(table, exp.Table)
            or table.db
            or table.name.lower() not in ctes
        ):
            return None
        select = ctes[table.name.lower()]
    return None


def column_renames(before: str, after: str) -> dict[str, str] | None:
    """{old: new} output columns renamed between two versions of a model; None when either
    side cannot be read with confidence (see the module docstring)."""
    read_before, read_after = _named_outputs(before), _named_outputs(after)
    if read_before is None or read_after is None or read_before[1] != read_after[1]:
        return None  # the stars changed: what they bring is not known on either side
    was, now = read_before[0], read_after[0]
    gone = [name for name in was if name not in now]
    came = [name for name in now if name not in was]
    found: dict[str, str] = {}
    for old in gone:
        same = [new for new in came if now[new].expression == was[old].expression]
        rivals = [o for o in gone if was[o].expression == was[old].expression]
        if len(same) != 1 or len(rivals) != 1:
            continue
        if was[old].doubtful or now[same[0]].doubtful:
            return None  # a rename it cannot read with confidence: none followed at all
        found[old] = same[0]
    return found


def breaking_column_renames(evidence: Evidence) -> list[ColumnRename]:
    """The output columns the breaking change renamed, in the project's SQL models and those of
    its installed packages."""
    event = evidence.event
    repo = Path(event.repo_path or evidence.repo_root)
    failing = event.commit or "HEAD"
    try:
        found = change_base(repo, failing, evidence.last_good_commit)
        if found is None:
            return []
        head = run_git(repo, "rev-parse", "--verify", "--quiet", f"{failing}^{{commit}}",
                       timeout_s=QUERY_TIMEOUT_S).strip()  # fmt: skip
        changed_files = changed_texts(repo, found[0], head)
    except VcsError:
        return []
    # the project's models and the installed packages' (an upgrade that renamed a column)
    files = {**package_model_files(evidence), **model_files(evidence)}
    models = {path: name for name, path in files.items() if path.endswith(".sql")}
    renames = []
    for changed in changed_files:
        model = models.get(changed.path)
        if model is None or changed.before is None or changed.after is None:
            continue
        renamed = column_renames(changed.before, changed.after)
        was = _named_outputs(changed.before)
        for old, new in sorted((renamed or {}).items()):
            assert was is not None
            renames.append(ColumnRename(model, changed.path, old, new, frozenset(was[0])))
    return renames
