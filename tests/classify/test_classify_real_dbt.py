"""End to end on real dbt runs: break the shop repo, run dbt, gather evidence, classify."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.dbt import gather_dbt_evidence
from tests.conftest import commit_all, git, run_dbt

pytestmark = pytest.mark.slow

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STAMP = re.compile(r"^\d\d:\d\d:\d\d\s")


def _crash_message(stdout: str) -> str:
    """dbt's 'Encountered an error:' block, as the intake would take it from the log."""
    lines = _ANSI.sub("", stdout).splitlines()
    start = next(i for i, ln in enumerate(lines) if "Encountered an error:" in ln)
    block = []
    for line in lines[start + 1 :]:
        if _STAMP.match(line):
            break
        block.append(line)
    return "\n".join(block).strip()


def _event(repo: Path, unit_id: str, unit_path: str | None, **kw: object) -> UniversalFailureEvent:
    return UniversalFailureEvent.model_validate(
        {
            "source": FailureSource.DBT,
            "pipeline_id": "shop",
            "unit_id": unit_id,
            "unit_path": unit_path,
            "repo_path": str(repo),
            "commit": git(repo, "rev-parse", "HEAD"),
            "dbt": DbtInvocation(command="build", project_dir=str(repo), cwd=str(repo)),
            **kw,
        }
    )


def test_typo_is_code_bug_and_null_in_seed_is_data_issue(shop_repo: Path, tmp_path: Path) -> None:
    orders = shop_repo / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text().replace("o.status,", "o.statsu,"))
    seed = shop_repo / "seeds" / "raw_customers.csv"
    seed.write_text(seed.read_text().replace(",alan@example.com,", ",,"))
    commit_all(shop_repo, "orders: columns; new customers export")
    snapshot = tmp_path / "snap.duckdb"
    shutil.copy(shop_repo / "shop.duckdb", snapshot)

    # stg_customers is not upstream of orders, so its failing test does not skip orders.
    res = run_dbt(shop_repo, "build", "--select", "raw_customers", "stg_customers", "orders")
    assert res.returncode == 1, res.stdout[-2000:]
    target = shop_repo / "target"
    manifest = json.loads((target / "manifest.json").read_text())
    results = json.loads((target / "run_results.json").read_text())["results"]
    failed = {r["unique_id"]: r for r in results if r["status"] in ("error", "fail")}
    test_id = next(u for u in failed if u.startswith("test.shop.not_null_stg_customers_email"))
    assert set(failed) == {"model.shop.orders", test_id}
    artifacts = {"manifest": str(target / "manifest.json")}

    verdicts = {}
    for uid, result in failed.items():
        event = _event(
            shop_repo,
            uid,
            manifest["nodes"][uid]["original_file_path"],
            status=result["status"],
            error_message=result["message"],
            artifacts=artifacts,
        )
        evidence = gather_dbt_evidence(event, shop_repo, db_snapshot=snapshot)
        assert evidence.changed_files == ["models/marts/orders.sql", "seeds/raw_customers.csv"]
        verdicts[uid] = (evidence, classify_failure(evidence))

    ev, verdict = verdicts["model.shop.orders"]
    assert 'column named "statsu"' in ev.error
    assert ev.compiled_code is not None and "main" in ev.compiled_code  # from target/compiled
    assert ev.upstream[0].columns == ["order_id", "customer_id", "order_date", "status"]
    assert (verdict.cls, verdict.signature) == (FailureClass.CODE_BUG, "sql_error")
    assert "models/marts/orders.sql changed" in verdict.reason

    ev, verdict = verdicts[test_id]
    assert (ev.test_kind, ev.tested_model, ev.tested_column) == (
        "not_null",
        "stg_customers",
        "email",
    )
    assert verdict.cls is FailureClass.DATA_ISSUE
    assert "models/staging/stg_customers.sql did not change" in verdict.reason


def test_missing_env_var_in_profile_is_env_mismatch(shop_repo: Path) -> None:
    profiles = shop_repo / "profiles.yml"
    profiles.write_text(
        profiles.read_text().replace("path: shop.duckdb", "path: \"{{ env_var('SHOP_DB_PATH') }}\"")
    )
    res = run_dbt(shop_repo, "build", "--select", "stg_orders")
    assert res.returncode == 2
    message = _crash_message(res.stdout)
    assert "Env var required but not provided: 'SHOP_DB_PATH'" in message
    event = _event(shop_repo, "model.shop.stg_orders", None, status="parse_error",
                   error_message=message)  # fmt: skip
    verdict = classify_failure(gather_dbt_evidence(event, shop_repo))
    assert (verdict.cls, verdict.signature) == (FailureClass.ENV_MISMATCH, "missing_env_var")


def test_database_held_by_another_writer_is_infra_issue(shop_repo: Path) -> None:
    with duckdb.connect(str(shop_repo / "shop.duckdb")) as writer:
        writer.execute("select 1")
        res = run_dbt(shop_repo, "build", "--select", "stg_orders")
    assert res.returncode == 2
    message = _crash_message(res.stdout)
    assert "Could not set lock on file" in message
    event = _event(shop_repo, "model.shop.stg_orders", "models/staging/stg_orders.sql",
                   error_message=message)  # fmt: skip
    verdict = classify_failure(gather_dbt_evidence(event, shop_repo))
    assert (verdict.cls, verdict.signature) == (FailureClass.INFRA_ISSUE, "database_lock")
