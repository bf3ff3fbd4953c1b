"""The corpus on disk: every scenario loads, applies to its base project and breaks a run
the way its mode says; bad scenario files are refused with one clear line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from patchit.bench.corpus import DEFAULT_CORPUS
from patchit.bench.corpus_model import apply_edits, load_corpus, load_scenario, projects_dir
from patchit.errors import BadInputError

SCENARIOS = load_corpus(DEFAULT_CORPUS)


def test_corpus_covers_the_issue_minimums() -> None:
    code = [s for s in SCENARIOS if s.expect == "fixed"]
    escalations = [s for s in SCENARIOS if s.expect == "escalated"]
    traps = [s for s in SCENARIOS if s.trap]
    assert len(SCENARIOS) >= 30
    assert len(code) >= 15 and len(escalations) >= 10 and len(traps) >= 5
    assert {s.expect_class for s in escalations} >= {
        "data_issue", "env_mismatch", "infra_issue", "dependency_issue"
    }  # fmt: skip
    assert {s.kind for s in SCENARIOS} == {"dbt", "airflow_callback", "airflow_scan"}
    assert all(s.path is not None and s.path.stem == s.name for s in SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_every_breaking_change_applies_to_its_base_project(
    scenario: object, tmp_path: Path
) -> None:
    from patchit.bench.corpus_model import Scenario

    assert isinstance(scenario, Scenario)
    repo = tmp_path / "repo"
    shutil.copytree(projects_dir(DEFAULT_CORPUS) / scenario.project, repo)
    before = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    apply_edits(repo, scenario.edits)
    after = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    assert before != after
    for path, content in after.items():
        if path.suffix == ".py":  # a scan scenario may break imports, never Python syntax
            compile(content, str(path), "exec")


def test_search_text_must_occur_exactly_once(tmp_path: Path) -> None:
    scenario = next(s for s in SCENARIOS if s.name == "dbt_column_typo")
    repo = tmp_path / "repo"
    shutil.copytree(projects_dir(DEFAULT_CORPUS) / scenario.project, repo)
    apply_edits(repo, scenario.edits)
    with pytest.raises(BadInputError, match="occurs 0 times"):
        apply_edits(repo, scenario.edits)  # already applied: the search text is gone


def test_bad_scenario_files_are_refused_with_the_file_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nkind = "dbt"\n')
    with pytest.raises(BadInputError, match=r"bad\.toml: not a valid benchmark scenario"):
        load_scenario(bad)
    fixed_non_code = (DEFAULT_CORPUS / "dbt_db_locked.toml").read_text()
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(fixed_non_code.replace('expect = "escalated"', 'expect = "fixed"'))
    with pytest.raises(BadInputError, match="only a code_bug can be expected fixed"):
        load_scenario(wrong)


def test_only_names_unknown_scenarios(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="--only nope: no such scenario"):
        load_corpus(DEFAULT_CORPUS, ["dbt_column_typo", "nope"])
    assert [s.name for s in load_corpus(DEFAULT_CORPUS, ["dbt_ref_typo"])] == ["dbt_ref_typo"]
    with pytest.raises(BadInputError, match="no such corpus directory"):
        load_corpus(tmp_path / "missing")


def test_cli_reports_a_bad_only_as_bad_input() -> None:
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "bench", "--only", "no_such_scenario"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "no_such_scenario: no such scenario" in proc.stderr
