"""Partial parsing across candidates: seeded from the user's failing run, then carried on.

Each candidate's project lives in its own worktree, so only dbt's own checks (profile hash,
file checksums) keep a carried parse honest; these tests make sure it is both reused and right.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.harnesses.dbt.protocol import WARM_UP_PARSE
from patchit.harnesses.dbt.saved_parse import rebase_manifest
from patchit.sandbox.snapshot import (
    PARTIAL_PARSE_FILE,
    read_parse_mode,
    rebase_partial_parse,
    snapshot_database,
)
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import commit_all, git, run_dbt

pytestmark = pytest.mark.slow

DAILY = Path("models") / "marts" / "daily_revenue.sql"


@pytest.fixture
def failed_run(shop_repo: Path) -> UniversalFailureEvent:
    """The user commits a typo in daily_revenue and their `dbt build` fails on it."""
    daily = shop_repo / DAILY
    daily.write_text(daily.read_text().replace("sum(amount)", "sum(amout)"))
    commit_all(shop_repo, "daily_revenue: typo")
    started = datetime.now(UTC)
    res = run_dbt(shop_repo, "build", "--select", "daily_revenue+")
    assert res.returncode == 1, res.stdout[-2000:]
    assert "amout" in res.stdout
    return UniversalFailureEvent(
        source="dbt",
        pipeline_id="shop",
        unit_id="model.shop.daily_revenue",
        repo_path=str(shop_repo),
        commit=git(shop_repo, "rev-parse", "HEAD"),
        dbt=DbtInvocation(
            command="build",
            args=["build", "--select", "daily_revenue+"],
            project_dir=str(shop_repo),
            cwd=str(shop_repo),
            started_utc=started,
        ),
    )


@pytest.fixture
def candidates(
    shop_repo: Path, failed_run: UniversalFailureEvent, _patchit_home: Path
) -> Iterator[list[Workspace]]:
    """Three candidates: a wrong fix, the right fix, the right fix again."""
    snapshot = snapshot_database(shop_repo / "shop.duckdb", _patchit_home / "snapshots" / "inc")
    workspaces: list[Workspace] = []
    for number, column in enumerate(["amout_total", "amount", "amount"], start=1):
        root = create_worktree(shop_repo, "HEAD", worktrees_home() / f"inc-{number}")
        daily = root / DAILY
        daily.write_text(daily.read_text().replace("sum(amout)", f"sum({column})"))
        scratch = _patchit_home / "sandboxes" / "inc" / f"candidate-{number}"
        workspaces.append(Workspace(root=root, scratch=scratch, snapshot=snapshot.parent))
    yield workspaces
    for workspace in workspaces:
        remove_worktree(shop_repo, workspace.root)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_candidates_reuse_the_parse_and_are_judged_right(
    warm: bool,
    failed_run: UniversalFailureEvent,
    candidates: list[Workspace],
    shop_repo: Path,
    _patchit_home: Path,
) -> None:
    wrong, right, again = candidates
    with DbtHarness(warm=warm) as harness:
        first = harness.verify(wrong, failed_run)
        # The user's own partial parse was valid here: the sandbox profile hashes as theirs.
        assert harness.last_parse_mode == "partial"
        # no run writes a debug log: the worker (or the fresh process) says how dbt parsed
        assert read_parse_mode(wrong.scratch / "logs") == "unknown"
        assert not first.passed
        assert "amout_total" in first.output  # the patched file was re-parsed, not reused
        assert "model.shop.daily_revenue" in first.failures

        second = harness.verify(right, failed_run)
        assert harness.last_parse_mode == "partial"
        seeded = (right.scratch / "target" / PARTIAL_PARSE_FILE).read_bytes()
        if warm:  # an empty seed: dbt started from the parse the worker decoded for the first
            assert seeded == b""
        else:  # the user's parse as it is, re-rooted as the process decoded it; not written
            assert seeded == (shop_repo / "target" / PARTIAL_PARSE_FILE).read_bytes()
        assert second.passed, second.output
        assert second.failures == []

    # dbt's parse holds rendered vars: the harness keeps none once closed (but the worker's
    # warm-up parse, of patchit's own tiny project, which holds no user's vars or profile).
    kept = (_patchit_home / "cache").rglob("*.msgpack")
    assert [p for p in kept if p != _patchit_home / "cache" / WARM_UP_PARSE] == []
    assert list((_patchit_home / "sandboxes").glob(".dbt-failing-parse-*")) == []
    # A new harness (a later patchit process) starts from the user's run again.
    with DbtHarness(warm=warm) as later:
        assert later.verify(again, failed_run).passed
        assert later.last_parse_mode == "partial"

    # The sandbox profile names the DB relatively; the copy sits in the candidate's worktree.
    profile = YAML(typ="safe").load((right.scratch / "profiles.yml").read_text())
    assert profile["shop"]["outputs"]["dev"]["path"] == "shop.duckdb"
    assert (right.root / "shop.duckdb").is_file()
    assert git(shop_repo, "status", "--porcelain") == ""


def test_a_changed_profile_falls_back_to_a_full_parse(
    failed_run: UniversalFailureEvent, candidates: list[Workspace]
) -> None:
    """--vars differing from the user's run: dbt refuses the seed, and says why."""
    assert failed_run.dbt is not None
    failed_run.dbt.vars = "{segment_floor: 1}"
    with DbtHarness(warm=True) as harness:
        result = harness.verify(candidates[1], failed_run)
        assert result.passed, result.output
        assert harness.last_parse_mode.startswith("full: config vars"), harness.last_parse_mode
        # the next candidate in that worktree starts from that run's parse, not the refused one
        assert harness.verify(candidates[1], failed_run).passed
        assert harness.last_parse_mode == "partial"


def test_the_worker_re_roots_the_decoded_parse_as_the_file_would_be(
    failed_run: UniversalFailureEvent, shop_repo: Path, tmp_path: Path
) -> None:
    """`rebase_manifest` (the worker's decoded parse) and `rebase_partial_parse` (the file)
    give the same manifest, byte for byte once encoded again."""
    from dbt.contracts.graph.manifest import Manifest
    from dbt.parser.manifest import extended_mashumaro_encoder, extended_mashumuro_decoder

    def decoded(path: Path) -> Manifest:
        return Manifest.from_msgpack(path.read_bytes(), decoder=extended_mashumuro_decoder)

    user_parse = shop_repo / "target" / PARTIAL_PARSE_FILE
    new_root = tmp_path / "wt"
    assert rebase_partial_parse(user_parse, tmp_path / "target", new_root)
    from_file = decoded(tmp_path / "target" / PARTIAL_PARSE_FILE)
    in_memory = decoded(user_parse)
    rebase_manifest(in_memory, str(new_root))
    assert any(f.path.project_root == str(new_root) for f in in_memory.files.values())
    encode = extended_mashumaro_encoder
    assert in_memory.to_msgpack(encode) == from_file.to_msgpack(encode)


def test_an_incident_s_prefetch_decodes_the_parse_before_the_first_candidate(
    failed_run: UniversalFailureEvent, candidates: list[Workspace]
) -> None:
    """`prefetch` (the loop starts it with the worker) has the worker decode the failing run's
    parse: the first candidate's run is seeded empty and starts from it, and is judged right."""
    with DbtHarness(warm=True) as harness:
        harness.start()
        harness.prefetch(failed_run)
        right = candidates[1]
        result = harness.verify(right, failed_run)
        assert result.passed, result.output
        assert harness.last_parse_mode == "partial"
        assert (right.scratch / "target" / PARTIAL_PARSE_FILE).read_bytes() == b""
        assert harness.last_breakdown_ms["patchit: saved parse"] < 1000
        assert not harness.verify(candidates[0], failed_run).passed  # the wrong fix: still wrong
