"""Empty optional keys in properties YAML, from a real dbt 1.11 parsing error."""

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence
from patchit.patching.apply import preview_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.yaml_props import FixYamlStrategy
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import Broken, build_with, copy_project, make_evidence


def _evidence(project: Path, message: str) -> Evidence:
    return make_evidence(
        project,
        message,
        unit_id="shop",
        unit_path=None,
        error_type="Parsing Error",
        status="parse_error",
    )


@pytest.fixture
def strategy() -> Strategy:
    return FixYamlStrategy()


@pytest.fixture
def evidence(yaml_broken: Broken) -> Evidence:
    return _evidence(yaml_broken.project, yaml_broken.parse_error())


@pytest.fixture
def unrelated_evidence(ref_broken: Broken) -> Evidence:
    return _evidence(ref_broken.project, ref_broken.parse_error())


class TestFixYamlContract(StrategyContract):
    pass


def test_message_is_the_one_dbt_really_gives(evidence: Evidence) -> None:
    assert evidence.error.startswith(
        "Parsing Error\n  Invalid models config given in models/marts/schema.yml @ models: "
        "{'name': 'daily_revenue', 'columns': [{'name': 'order_date', 'data_tests': None}]"
    )
    assert evidence.error.endswith(
        "- at path ['columns'][0]['data_tests']: None is not of type 'array'"
    )


def test_empty_key_line_is_removed_and_other_lines_kept(evidence: Evidence) -> None:
    (candidate,) = FixYamlStrategy().fix(evidence, [])
    (edit,) = candidate.edits
    assert edit.path == "models/marts/schema.yml"
    assert "        data_tests:  # to do: add tests\n" in edit.search
    assert edit.replace == edit.search.replace("        data_tests:  # to do: add tests\n", "")


@pytest.mark.slow
def test_fixed_properties_build(evidence: Evidence, tmp_path: Path) -> None:
    candidate = FixYamlStrategy().fix(evidence, [])[0]
    code, out = build_with(evidence, candidate, tmp_path / "shop", "daily_revenue")
    assert code == 0, out


def test_model_level_key_in_a_commented_file(evidence: Evidence, tmp_path: Path) -> None:
    project = copy_project(Path(evidence.repo_root), tmp_path / "shop")
    schema = project / "models/marts/schema.yml"
    text = schema.read_text().replace(
        "  - name: customers\n", "  - name: customers  # core\n    tests:\n"
    )
    schema.write_text(text)
    message = (
        "Parsing Error\n  Invalid models config given in models/marts/schema.yml @ models: "
        "{'name': 'customers', 'tests': None, 'columns': []} - at path ['tests']: None is not "
        "of type 'array'"
    )
    (candidate,) = FixYamlStrategy().fix(_evidence(project, message), [])
    ((before, after),) = preview_edits(project, candidate.edits).values()
    assert after == before.replace("    tests:\n", "", 1)
    assert "  - name: customers  # core\n    columns:" in after


def test_a_required_key_is_never_removed(evidence: Evidence) -> None:
    message = evidence.error.replace("['columns'][0]['data_tests']", "['columns'][0]['name']")
    assert FixYamlStrategy().fix(_evidence(Path(evidence.repo_root), message), []) == []
