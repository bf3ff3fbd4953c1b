"""`bench --warehouse snowflake`'s pieces that need no server: the retargeted profile, the
selection of scenarios, a missing emulator named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from patchit.bench.corpus import DEFAULT_CORPUS, run_corpus
from patchit.bench.corpus_sf import SfBench
from patchit.bench.sf_server import FAKESNOW_ENV, SfServer
from patchit.errors import BadInputError


def test_the_profile_is_retargeted_with_an_upper_case_schema_per_checkout(tmp_path: Path) -> None:
    bench = SfBench(SfServer("127.0.0.1", 6544))
    copy = bench.retarget(DEFAULT_CORPUS.parent / "projects" / "billing", tmp_path / "billing")
    profile = yaml.safe_load((copy / "profiles.yml").read_text())["billing"]
    output = profile["outputs"][profile["target"]]
    assert (output["type"], output["port"], output["protocol"]) == ("snowflake", 6544, "http")
    assert output["schema"] == "{{ env_var('BENCH_SF_SCHEMA') }}"
    one = bench.schema_of(tmp_path / "user")
    assert one == one.upper() and one != bench.schema_of(tmp_path / "reference")
    assert bench.env(tmp_path / "user") == {"BENCH_SF_SCHEMA": one}
    assert 'sf_role = "' in bench.operator_settings  # else nothing is verified on Snowflake


def test_snowflake_runs_only_dbt_scenarios_that_make_sense_there() -> None:
    with pytest.raises(BadInputError, match="none of the chosen scenarios runs on Snowflake"):
        run_corpus(DEFAULT_CORPUS, ["af_key_typo", "dbt_db_locked"], warehouse="snowflake")


def test_a_missing_emulator_is_one_line_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAKESNOW_ENV, str(tmp_path / "no-fakesnow"))
    with pytest.raises(BadInputError, match=r"emulator is missing .*run `make install`"):
        run_corpus(DEFAULT_CORPUS, ["dbt_ref_typo"], workdir=tmp_path / "w",
                   warehouse="snowflake")  # fmt: skip
