"""Misspelt macro calls, from a real dbt 1.11 compilation error."""

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence
from patchit.patching.base import Strategy
from patchit.patching.fixits._common import call_pattern, rewrite_jinja
from patchit.patching.fixits.macros import FixMacroStrategy
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import Broken, build_with, copy_project, make_evidence

PATH = "models/staging/stg_payments.sql"


def _evidence(project: Path, message: str) -> Evidence:
    return make_evidence(
        project,
        message,
        unit_id="model.shop.stg_payments",
        unit_path=PATH,
        error_type="Compilation Error",
    )


@pytest.fixture
def strategy() -> Strategy:
    return FixMacroStrategy()


@pytest.fixture
def evidence(staging_broken: Broken) -> Evidence:
    return _evidence(
        staging_broken.project, staging_broken.node_messages["model.shop.stg_payments"]
    )


@pytest.fixture
def unrelated_evidence(staging_broken: Broken) -> Evidence:
    return _evidence(staging_broken.project, staging_broken.node_messages["model.shop.stg_orders"])


class TestFixMacroContract(StrategyContract):
    pass


def test_message_is_the_one_dbt_really_gives(evidence: Evidence) -> None:
    assert evidence.error == (
        "Compilation Error in model stg_payments (models/staging/stg_payments.sql)\n"
        "  'cents_to_dolars' is undefined. This can happen when calling a macro that does not "
        'exist. Check for typos and/or install package dependencies with "dbt deps".'
    )


def test_misspelt_call_is_renamed(evidence: Evidence) -> None:
    (candidate,) = FixMacroStrategy().fix(evidence, [])
    (edit,) = candidate.edits
    assert edit.path == PATH
    assert edit.replace == edit.search.replace("cents_to_dolars", "cents_to_dollars")


@pytest.mark.slow
def test_fixed_model_builds(evidence: Evidence, tmp_path: Path) -> None:
    candidate = FixMacroStrategy().fix(evidence, [])[0]
    code, out = build_with(evidence, candidate, tmp_path / "shop", "stg_payments")
    assert code == 0, out


def test_call_inside_another_macro_is_fixed_there(evidence: Evidence, tmp_path: Path) -> None:
    project = copy_project(Path(evidence.repo_root), tmp_path / "shop")
    model = project / PATH
    model.write_text(model.read_text().replace("cents_to_dolars(", "price("))
    (project / "macros/price.sql").write_text(
        "{% macro price(column_name) %}{{ cents_to_dolars(column_name) }}{% endmacro %}\n"
    )
    (candidate,) = FixMacroStrategy().fix(_evidence(project, evidence.error), [])
    assert candidate.edits[0].path == "macros/price.sql"
    assert "cents_to_dollars(column_name)" in candidate.edits[0].replace


def test_two_equally_near_macros_give_no_candidate(evidence: Evidence, tmp_path: Path) -> None:
    project = copy_project(Path(evidence.repo_root), tmp_path / "shop")
    # names are compared without case or separators, so these two are exactly as near
    (project / "macros/shouting.sql").write_text(
        "{% macro CENTS_TO_DOLLARS(c) %}{{ c }}{% endmacro %}\n"
    )
    assert FixMacroStrategy().fix(_evidence(project, evidence.error), []) == []


def test_no_near_macro_gives_no_candidate(evidence: Evidence) -> None:
    far = evidence.error.replace("cents_to_dolars", "money_format")
    assert FixMacroStrategy().fix(_evidence(Path(evidence.repo_root), far), []) == []


def test_a_macro_rename_leaves_jinja_comments_alone() -> None:
    # the public datavault project's macro documents its use in a `{# #}` comment; following
    # the rename renamed the example's column alias too (`as risk_band` -> `as risk_tier`)
    text = (
        "{#\n  risk_band: classify.\n    {{ risk_band('n', 'v') }} as risk_band\n#}\n"
        "{% macro risk_tier(n, v) %}case when {{ n }} > 3 then 'high' end{% endmacro %}\n"
        "select {{ risk_band('a', 'b') }} as risk_band\n"
    )
    after = rewrite_jinja(text, call_pattern("risk_band"), "risk_tier", None)
    assert after == text.replace(
        "select {{ risk_band('a', 'b') }}", "select {{ risk_tier('a', 'b') }}"
    )
