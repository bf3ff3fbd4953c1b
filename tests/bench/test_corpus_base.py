"""A scenario's base project (DuckDB file moved, CRLF files) and the byte check of a fixed
branch's line ends; no dbt."""

from __future__ import annotations

from pathlib import Path

import yaml

from patchit.bench.corpus import DEFAULT_CORPUS
from patchit.bench.corpus_base import base_project, crlf_lost
from patchit.bench.corpus_judge import judge
from patchit.bench.corpus_model import apply_edits, load_corpus, projects_dir
from patchit.bench.corpus_run import BranchCheck, good_key
from tests.bench.test_corpus_judge import observed

BY_NAME = {s.name: s for s in load_corpus(DEFAULT_CORPUS)}
BILLING = projects_dir(DEFAULT_CORPUS) / "billing"
SCHEMA = "models/staging/schema.yml"


def test_a_scenario_without_base_changes_uses_the_base_project(tmp_path: Path) -> None:
    assert base_project(BILLING, tmp_path, BY_NAME["dbt_revert_yaml_quote"]) == BILLING
    assert not (tmp_path / "base").exists()


def test_the_duckdb_file_moves_under_target_and_the_good_run_is_not_shared(
    tmp_path: Path,
) -> None:
    scenario = BY_NAME["dbt_target_path_fresh_checkout"]
    base = base_project(BILLING, tmp_path, scenario)
    profiles = yaml.safe_load((base / "profiles.yml").read_text())
    assert profiles["billing"]["outputs"]["dev"]["path"] == "target/billing.duckdb"
    assert (
        scenario.fresh_checkout
        and "target/billing.duckdb" not in (BILLING / "profiles.yml").read_text()
    )  # the base project itself is not changed
    assert good_key(scenario) != good_key(BY_NAME["dbt_ref_typo"])


def test_crlf_files_stay_crlf_through_the_breaking_change(tmp_path: Path) -> None:
    scenario = BY_NAME["dbt_revert_yaml_quote_crlf"]
    base = base_project(BILLING, tmp_path, scenario)
    text = (base / SCHEMA).read_bytes()
    assert text == (BILLING / SCHEMA).read_bytes().replace(b"\n", b"\r\n")
    apply_edits(base, scenario.edits)  # the scenario's search is written with "\n"
    broken = (base / SCHEMA).read_bytes()
    assert b'"sepa, "paypal", "wire"]\r\n' in broken and crlf_lost(base, [SCHEMA], base) == []


def test_a_branch_that_lost_crlf_or_its_final_newline_fails_the_scenario(tmp_path: Path) -> None:
    broken, branch = tmp_path / "broken", tmp_path / "branch"
    for tree in (broken, branch):
        (tree / "models").mkdir(parents=True)
    (broken / "models" / "a.yml").write_bytes(b"a: 1\r\nb: 2\r\n")
    for content, lost in ((b"a: 1\r\nb: 3\r\n", []), (b"a: 1\nb: 3\r\n", ["models/a.yml"]),
                          (b"a: 1\r\nb: 3", ["models/a.yml"])):  # fmt: skip
        (branch / "models" / "a.yml").write_bytes(content)
        assert crlf_lost(branch, ["models/a.yml"], broken) == lost
    check = BranchCheck("20260115-abcdef", "patchit/x", [[1, "x"]], True, [SCHEMA],
                        crlf_lost=[SCHEMA])  # fmt: skip
    result = judge(observed("dbt_revert_yaml_quote_crlf", "fixed", "code_bug", branches=[check]))
    assert (
        not result.passed and result.reason == f"the branch rewrote the CRLF line ends of {SCHEMA}"
    )
    check.crlf_lost = []
    assert judge(observed("dbt_revert_yaml_quote_crlf", "fixed", "code_bug",
                          branches=[check])).passed  # fmt: skip
