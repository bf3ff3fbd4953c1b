"""The corpus on Snowflake (`patchit bench --warehouse snowflake`): dbt scenarios through the
real runner on a throw-away Snowflake emulator (fakesnow) the command starts and stops: a
fix (a ref typo, its branch's hidden check matching the good commit's) and an escalation (a
failing test on bad data), the user's schema's content the same before and after both. The
full run is `patchit bench --warehouse snowflake`.

Run elsewhere, not here again: the column typo and an incremental model's typo healed on
Snowflake end to end (tests/test_snowflake.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.warehouse_bench import assert_fix_and_escalation

pytestmark = pytest.mark.slow


def test_a_fix_and_an_escalation_on_snowflake_match_duckdb(tmp_path: Path) -> None:
    started = "starting a throw-away Snowflake emulator (fakesnow)"
    assert_fix_and_escalation("snowflake", "dbt_ref_typo", started, tmp_path)
