"""The corpus on disk: every scenario loads, applies to its base project and breaks a run
the way its mode says; bad scenario files are refused with one clear line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from patchit.bench.corpus import DEFAULT_CORPUS
from patchit.bench.corpus_keeps import keeps_missing
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
    text_keeps = [k for k in scenario.keeps if k.sql is None]
    assert keeps_missing(text_keeps, repo, None) == [], "the change must hold its own keeps"
    base = projects_dir(DEFAULT_CORPUS) / scenario.project
    if text_keeps:  # a revert to the base must lose at least one of them
        assert keeps_missing(text_keeps, base, None), "no keep is new in the change"


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


def test_keeps_are_checked_when_loaded(tmp_path: Path) -> None:
    text = (DEFAULT_CORPUS / "dbt_upstream_rename.toml").read_text()
    assert len(load_scenario(DEFAULT_CORPUS / "dbt_upstream_rename.toml").keeps) == 3
    for bad, why in (
        ('[[keeps]]\npath = "a.sql"\n', "a text keep needs both path and a non-empty text"),
        ('[[keeps]]\npath = "a.sql"\ntext = "x"\nsql = "select 1"\n', "either path and text"),
        ('[[keeps]]\npath = "a.sql"\ntext = "x"\nrows = [[1]]\n', "rows go with sql"),
    ):
        path = tmp_path / "bad_keeps.toml"
        path.write_text(text + "\n" + bad)
        with pytest.raises(BadInputError, match=r"bad_keeps\.toml: not a valid benchmark scenario"):
            load_scenario(path)
        with pytest.raises(BadInputError, match=why.replace("(", r"\(")):
            load_scenario(path)
    airflow = (DEFAULT_CORPUS / "af_helper_kwarg_renamed.toml").read_text()
    path = tmp_path / "af_sql_keep.toml"
    path.write_text(airflow + '\n[[keeps]]\nsql = "select 1"\n')
    with pytest.raises(BadInputError, match="keeps texts, not queries"):
        load_scenario(path)


def test_every_base_project_is_used_and_listed_in_the_corpus_readme() -> None:
    projects = {p.name for p in projects_dir(DEFAULT_CORPUS).iterdir() if p.is_dir()}
    assert projects == {s.project for s in SCENARIOS}
    readme = (DEFAULT_CORPUS.parent / "README.md").read_text()
    for name in projects:
        assert f"projects/{name}/" in readme, f"benchmarks/README.md does not list {name}"
    for scenario in SCENARIOS:
        assert f"| {scenario.name} |" in readme, f"benchmarks/README.md lacks {scenario.name}"
