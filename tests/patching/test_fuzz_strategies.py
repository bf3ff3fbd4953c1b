"""Hypothesis drives every registered tier-0 strategy, and the intent reader, with generated
breaking changes and errors: no exception escapes a strategy's `propose` (the search records
one that does as an `error` attempt, but a strategy that raises has proposed nothing).

Each example commits a generated change to a file of the example dbt project or to a DAG
script in a real git repository (the strategies read the change from git), with an error
message built from the names around it and from hostile text. `make fuzz` runs it with 10,000
examples (`PATCHIT_FUZZ_EXAMPLES`); the suite runs a few dozen, derandomized.
"""

from __future__ import annotations

import ast
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from patchit.config import PatchitConfig
from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.failing_rows import whole_rows
from patchit.evidence.intents import change_intents
from patchit.evidence.intents_sql import read_scopes
from patchit.evidence.model import Evidence, ProjectIndex, TracebackFrame
from patchit.evidence.py_renames import _functions
from patchit.evidence.sql_parse import projections
from patchit.examples import SHOP
from patchit.patching.base import ProposalRequest
from patchit.patching.delta import build_plan, split_change
from patchit.patching.fixits.message import _REPLACED
from patchit.patching.fixits.refs import _MISSING
from patchit.patching.registry import load_strategies
from patchit.patching.renames import functions_in
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo
from tests.fuzzing import Tally, fuzz_settings, hang_guard, hostile_text, seed, tally

pytestmark = pytest.mark.fuzz

DAG = "dags/job.py"
DAG_TEXT = (
    "from airflow.sdk import DAG\n\nrows = [{'amount': 3}]\n\n\ndef total(rows, scale=1):\n"
    "    return sum(r['amount'] * scale for r in rows)\n\n\n"
    "with DAG('job', schedule_interval='@daily') as dag:\n    total(rows, scale=2)\n"
)
MODELS = sorted(
    str(p.relative_to(SHOP)) for p in SHOP.rglob("*") if p.suffix in (".sql", ".yml")
    and "target" not in p.parts and p.name != "profiles.yml"
)  # fmt: skip
NAMES = ["amount", "amout", "order_id", "status", "customer_id", "orders", "stg_orders",
         "cents_to_dollars", "revenue", "scale", "total", "rows", "plan_id"]  # fmt: skip
ERRORS = [
    'Binder Error: Referenced column "{n}" not found in FROM clause!\nCandidate bindings: '
    '"{m}", "status"',
    'Parser Error: syntax error at or near "{n}"',
    "Model 'model.shop.orders' depends on a node named '{n}' which was not found",
    "'{n}' is undefined. This can happen when calling a macro that does not exist.",
    "KeyError: '{n}'",
    "TypeError: total() got an unexpected keyword argument '{n}'",
    "NameError: name '{n}' is not defined. Did you mean: '{m}'?",
    "AttributeError: 'dict' object has no attribute '{n}'",
    'Binder Error: Referenced table "{n}" not found!\nCandidate tables: "{m}"',
    'Catalog Error: Table with name {n} does not exist!\nDid you mean "{m}"?',
    "SQL compilation error: error line 3 at position 8\ninvalid identifier '{n}.{m}'",
    "This model has an enforced contract that failed.\n\n| column_name | definition_type | "
    "contract_type | mismatch_reason |\n| {n} | DOUBLE | DECIMAL(18,2) | data type mismatch |\n"
    "| {m} | BIGINT |  | missing in contract |",
]
name = st.one_of(st.sampled_from(NAMES), seed, hostile_text.map(lambda t: t[:40]))
error = st.one_of(
    st.builds(lambda t, n, m: t.format(n=n, m=m), st.sampled_from(ERRORS), name, name),
    hostile_text,
)
# lines that make the shapes the change-level fix-its read: a CTE renamed or read, a Jinja
# variable set or looped over, a qualified column
PIECES = ["{n} as (", "    select * from {n}", "        {n}.total_amount,",
          "{{%- set {n} = var('payment_methods') -%}}",
          "        {{% for m in {n} -%}} {{{{ m }}}}_amount, {{% endfor -%}}"]  # fmt: skip
piece = st.builds(lambda t, n: t.format(n=n), st.sampled_from(PIECES), name)
edit = st.tuples(st.integers(0, 60), st.integers(0, 3), st.one_of(name, hostile_text, piece))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = init_repo(tmp_path_factory.mktemp("fuzz") / "shop")
    for rel in MODELS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHOP / rel, root / rel)
    (root / DAG).parent.mkdir(parents=True, exist_ok=True)
    (root / DAG).write_text(DAG_TEXT)
    commit_all(root, "good")
    yield root


@pytest.fixture(scope="module")
def strategies() -> Iterator[list[object]]:
    found = [s for s in load_strategies() if s.tier == 0]
    assert len(found) > 5, "the tier-0 strategies are registered"
    # `PATCHIT_FUZZ_STRATEGIES=a,b`: only these (a new strategy fuzzed alone, at full count)
    if only := {n for n in os.environ.get("PATCHIT_FUZZ_STRATEGIES", "").split(",") if n}:
        unknown = only - {s.name for s in found}
        assert not unknown, f"PATCHIT_FUZZ_STRATEGIES names no tier-0 strategy: {unknown}"
        found = [s for s in found if s.name in only]
    yield list(found)
    for s in found:
        s.close()


def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Replace, insert after, drop, or mangle lines: what a careless commit does."""
    lines = text.splitlines(keepends=True) or [""]
    for at, how, piece in edits:
        i = at % len(lines)
        if how == 0:
            lines[i] = lines[i].replace(lines[i].strip().split(" ")[0] or "x", piece, 1)
        elif how == 1:
            lines.insert(i + 1, piece + "\n")
        elif how == 2 and len(lines) > 1:
            lines.pop(i)
        else:
            lines[i] = lines[i].replace(",", "", 1)
    return "".join(lines)


def _evidence(repo: Path, path: str, text: str, message: str, good: str) -> Evidence:
    head = git(repo, "rev-parse", "HEAD")
    dbt = path.endswith((".sql", ".yml"))
    stem = Path(path).stem
    event = UniversalFailureEvent(
        source=FailureSource.DBT if dbt else FailureSource.AIRFLOW, pipeline_id="shop",
        unit_id=f"model.shop.{stem}" if dbt else "total", unit_path=path, status="error",
        error_type="Runtime Error", error_message=message, repo_path=str(repo), commit=head,
        dbt=DbtInvocation(command="build", project_dir=str(repo), cwd=str(repo)) if dbt else None,
    )  # fmt: skip
    frames = [] if dbt else [TracebackFrame(path=path, line=11, function="<module>", code="")]
    return Evidence(
        event=event, repo_root=str(repo), project_dir="", unit_path=path, unit_name=stem,
        raw_code=text, error=message, last_good_commit=good, change_base=good,
        changed_files=[path], frames=frames, properties=_properties(repo),
        index=ProjectIndex(models=[Path(m).stem for m in MODELS if m.endswith(".sql")],
                           macros=["cents_to_dollars"], project_name="shop"),
    )  # fmt: skip


def _properties(repo: Path) -> dict[str, str]:
    """Every properties file of the project, as evidence holds the unit's."""
    return {rel: (repo / rel).read_text() for rel in MODELS if rel.endswith(".yml")}


@fuzz_settings(examples=10)
@given(
    path=st.sampled_from([*MODELS, DAG]),
    edits=st.lists(edit, min_size=1, max_size=4),
    message=error,
)
def test_no_tier0_strategy_raises_on_a_generated_change(
    repo: Path, strategies: list[object], path: str, edits: list[tuple[int, int, str]],
    message: str,
) -> None:  # fmt: skip
    fuzz: Tally = tally("tier-0 strategies")
    good = git(repo, "rev-parse", "HEAD")
    try:
        before = (repo / path).read_text()
        after = _mutate(before, edits).encode("utf-8", "replace").decode("utf-8")
        (repo / path).write_text(after)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", "the change")
        evidence = _evidence(repo, path, after, message, good)
        fuzz.run(lambda: change_intents(evidence), (), (path, edits))
        request = ProposalRequest(evidence=evidence, config=PatchitConfig(), incident_id="f")
        for strategy in strategies:
            shown = (getattr(strategy, "name", "?"), path, edits, message)
            fuzz.run(lambda s=strategy: s.propose(request), (), shown)  # type: ignore[attr-defined]
    finally:
        git(repo, "reset", "-q", "--hard", good)
    fuzz.assert_clean()


# -- what the fuzzing found -----------------------------------------------------------------


def test_a_plan_over_a_removed_line_does_not_raise() -> None:
    # a line rewritten beside a line removed: the removed line has no token groups to rank
    # (IndexError in the partial revert's plan, shown only as a warning before)
    change = split_change("m.sql", "select\n    a,\n    b\nfrom t\n", "select\n    a\nfrom t\n")
    assert [s.kind for h in change.hunks for s in h.slots] == ["pair", "removed"]
    plan = build_plan([change], lambda _path, _slot: 0, set())
    assert frozenset(change.atoms()) in plan


def test_a_long_message_is_read_in_linear_time() -> None:
    # "X has been replaced by Y" over a long run of word characters took 40 s for 16 kB
    message = "CRITICAL" * 20_000 + " --password "
    with hang_guard(2.0):
        assert _REPLACED.search(message) is None
        found = _REPLACED.search(message + "\ndays_ago has been replaced by pendulum.today\n")
    assert found is not None and (found["old"], found["new"]) == ("days_ago", "pendulum.today")


def test_a_long_run_of_words_is_read_in_linear_time() -> None:
    # the missing-node message's kind was read lazily from every capital letter: 10 s of CPU
    # for a message of "Did you mean" repeated (make fuzz, 10,000 examples)
    message = "Authorization: Bearer " + "Did you mean " * 20_000 + "9" * 50
    with hang_guard(2.0):
        assert _MISSING.search(message) is None
    found = _MISSING.search(
        "Compilation Error\n  Semantic model 'semantic_model.shop.orders' (models/sm.yml) "
        "depends on a node named 'orders' which was not found"
    )
    assert found is not None and (found["uid"], found["name"]) == (
        "semantic_model.shop.orders", "orders")  # fmt: skip


def test_a_deep_expression_is_no_recursion_error() -> None:
    # a DAG file holding a 2,500-deep expression: the walks for function definitions went
    # down every expression and hit Python's recursion limit (make fuzz, 10,000 examples)
    text = "x = " + "/".join(["p"] * 2500) + "\n\ndef load(day):\n    return day\n"
    assert list(functions_in(text)) == ["load"]
    assert list(_functions(ast.parse(text))) == ["load"]


def test_a_tree_too_deep_for_sqlglots_generator_is_no_recursion_error(
    repo: Path, strategies: list[object]
) -> None:
    # a line of 1,000 `?` (parameters, nested one in the next) parses, and sqlglot's generator
    # then hits Python's recursion limit: change_intents and a fix-it raised (make fuzz,
    # 10,000 examples); every reader of a SQL tree now takes it as SQL it cannot read
    deep = "select a,\n:x" + "?" * 1000 + "\nb from t\n"
    assert read_scopes(deep) is None and projections(deep) is None
    assert whole_rows(deep) == "SELECT * FROM t"  # its columns are not generated
    good = git(repo, "rev-parse", "HEAD")
    path = "models/staging/stg_customers.sql"
    try:
        before = (repo / path).read_text()
        lines = before.splitlines(keepends=True)
        after = "".join([*lines[:3], ":x" + "?" * 1000 + "\n", *lines[3:]])
        (repo / path).write_text(after)
        git(repo, "commit", "-qam", "the change")
        evidence = _evidence(repo, path, after, "Parser Error: syntax error at or near ?", good)
        change_intents(evidence)
        request = ProposalRequest(evidence=evidence, config=PatchitConfig(), incident_id="f")
        for strategy in strategies:
            strategy.propose(request)  # type: ignore[attr-defined]
    finally:
        git(repo, "reset", "-q", "--hard", good)
