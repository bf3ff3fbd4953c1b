"""The user's partial-parse file, carried into a sandbox, is re-rooted at the worktree."""

from __future__ import annotations

from pathlib import Path

import msgpack

from patchit.sandbox.snapshot import PARTIAL_PARSE_FILE, rebase_partial_parse

USER = "/home/dana/shop"
DBT = "/venv/site-packages/dbt/include/global_project"


def parse_file(tmp_path: Path) -> Path:
    data = {
        "metadata": {"project_name": "shop"},
        "files": {
            "shop://seeds/raw_orders.csv": {
                "path": {"relative_path": "raw_orders.csv", "project_root": USER}
            },
            "dbt_utils://macros/x.sql": {
                "path": {"relative_path": "x.sql", "project_root": f"{USER}/dbt_packages/u"}
            },
            "dbt://macros/adapters.sql": {
                "path": {"relative_path": "adapters.sql", "project_root": DBT}
            },
        },
        "nodes": {
            "seed.shop.raw_orders": {"root_path": USER, "raw_code": USER},
            "model.shop.orders": {"raw_code": "select 1"},
        },
        "disabled": {"seed.shop.old": [{"root_path": USER}]},
        "generated": msgpack.ExtType(2, b"2026-11-26T10:00:00"),
        "elsewhere": "/home/dana/shopping",  # a longer path sharing the prefix
    }
    source = tmp_path / "user" / PARTIAL_PARSE_FILE
    source.parent.mkdir()
    source.write_bytes(msgpack.packb(data, use_bin_type=True))
    return source


def read(path: Path) -> dict:
    return msgpack.unpackb(path.read_bytes(), raw=False, ext_hook=msgpack.ExtType)


def test_roots_of_the_project_and_its_packages_move_to_the_worktree(tmp_path: Path) -> None:
    target = tmp_path / "wt" / "target"
    assert rebase_partial_parse(parse_file(tmp_path), target, Path("/sbx/wt"))
    data = read(target / PARTIAL_PARSE_FILE)
    files = data["files"]
    assert files["shop://seeds/raw_orders.csv"]["path"]["project_root"] == "/sbx/wt"
    assert files["dbt_utils://macros/x.sql"]["path"]["project_root"] == "/sbx/wt/dbt_packages/u"
    assert files["dbt://macros/adapters.sql"]["path"]["project_root"] == DBT  # not the project's
    assert data["nodes"]["seed.shop.raw_orders"]["root_path"] == "/sbx/wt"
    assert data["nodes"]["seed.shop.raw_orders"]["raw_code"] == USER  # only paths are moved
    assert data["disabled"]["seed.shop.old"][0]["root_path"] == "/sbx/wt"
    assert data["generated"] == msgpack.ExtType(2, b"2026-11-26T10:00:00")  # dbt's dates kept
    assert data["elsewhere"] == "/home/dana/shopping"


def test_a_damaged_or_foreign_file_is_not_carried(tmp_path: Path) -> None:
    target = tmp_path / "target"
    bad = tmp_path / "bad.msgpack"
    bad.write_bytes(b"\xc1 not msgpack")
    assert not rebase_partial_parse(bad, target, tmp_path)
    foreign = tmp_path / "foreign.msgpack"
    foreign.write_bytes(msgpack.packb({"files": {}}, use_bin_type=True))
    assert not rebase_partial_parse(foreign, target, tmp_path)
    assert not rebase_partial_parse(tmp_path / "missing", target, tmp_path)
    assert not (target / PARTIAL_PARSE_FILE).exists()
