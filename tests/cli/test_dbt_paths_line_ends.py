"""`patchit dbt -- build` on two shapes of real projects (issue 33): a DuckDB file under dbt's
target folder, healed from a fresh clone; and a CRLF YAML file, whose fixed branch keeps CRLF
byte for byte. Real dbt-duckdb, real git, real SQLite."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from patchit.examples import SHOP
from tests.cli.helpers import incidents, patchit_dbt
from tests.conftest import BIN, commit_all, git

pytestmark = pytest.mark.slow

MART = "models/marts/daily_revenue.sql"
SCHEMA = "models/marts/schema.yml"


def blob(repo: Path, rev: str, path: str) -> bytes:
    """A file at a commit as git stores it (the test helper `git` reads text, losing CR)."""
    return subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"],
                          capture_output=True, check=True).stdout  # fmt: skip


def builds_from_scratch(repo: Path, branch: str, dest: Path) -> None:
    git(repo, "clone", "-q", "--branch", branch, str(repo), str(dest))
    build = subprocess.run([str(BIN / "dbt"), "build", "--profiles-dir", str(dest)], cwd=dest,
                           capture_output=True, text=True)  # fmt: skip
    assert build.returncode == 0, build.stdout[-2000:]


def test_a_duckdb_file_under_target_is_healed_from_a_fresh_clone(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    shutil.copytree(SHOP, origin, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    profiles = origin / "profiles.yml"
    profiles.write_text(profiles.read_text().replace("path: shop.duckdb",
                                                     "path: target/shop.duckdb"))  # fmt: skip
    (origin / ".gitignore").write_text("target/\nlogs/\n*.duckdb\n*.duckdb.wal\n")
    git(origin, "init", "-q", "-b", "main")
    commit_all(origin, "shop: models, the warehouse under target/")
    mart = origin / MART
    mart.write_text(mart.read_text().replace("ref('orders')", "ref('order')"))
    broken = commit_all(origin, "daily_revenue: read orders")
    clone = tmp_path / "clone"  # never built: no target/, no database
    git(tmp_path, "clone", "-q", str(origin), str(clone))

    res = patchit_dbt(clone, "build")
    assert res.returncode != 0 and "'order' which was not found" in res.stdout, res.stdout[-1500:]
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr[-3000:]
    assert "ref('orders')" in git(clone, "show", f"{incident['branch']}:{MART}")
    # the candidate built its own database in its worktree: the user's has none, and their
    # checkout is as the failing run left it
    assert not (clone / "target" / "shop.duckdb").exists()
    assert git(clone, "rev-parse", "HEAD") == broken and git(clone, "status", "--porcelain") == ""
    assert git(clone, "worktree", "list").count("\n") == 0
    builds_from_scratch(clone, incident["branch"], tmp_path / "check")


def test_a_crlf_yaml_fix_keeps_crlf_on_the_branch(shop_repo: Path, tmp_path: Path) -> None:
    schema = shop_repo / SCHEMA
    crlf = schema.read_bytes().replace(b"\n", b"\r\n")
    schema.write_bytes(crlf)
    commit_all(shop_repo, "schema.yml saved on Windows")
    good_line = b'                values: ["gold", "silver", "bronze"]\r\n'
    broken_line = b'                values: ["gold", "silver, "bronze", "tin"]\r\n'
    assert crlf.count(good_line) == 1
    schema.write_bytes(crlf.replace(good_line, broken_line))
    commit_all(shop_repo, "customer_segments: accept tin")

    res = patchit_dbt(shop_repo, "build")
    assert res.returncode != 0
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr[-3000:]
    fixed_line = b'                values: ["gold", "silver", "bronze", "tin"]\r\n'
    # byte for byte: the quote restored, "tin" kept, every other byte (each CR) as it was
    assert blob(shop_repo, incident["branch"], SCHEMA) == crlf.replace(good_line, fixed_line)
    assert schema.read_bytes() == crlf.replace(good_line, broken_line)  # the user's file
    builds_from_scratch(shop_repo, incident["branch"], tmp_path / "check")
