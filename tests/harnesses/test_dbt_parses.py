"""Which saved parse a dbt run starts from (`ParseSeeds`), without dbt: the runs' outcomes are
stand-ins, the files real."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from patchit.harnesses.dbt.parses import ParseSeeds
from patchit.harnesses.dbt.units import DbtOutcome, DbtSandbox
from patchit.loop.recovery import sweep_dead_runs
from patchit.memory import Memory
from patchit.sandbox.snapshot import PARTIAL_PARSE_FILE
from patchit.state.liveness import run_owner

USER_ROOT = "/home/dana/shop"


@pytest.fixture
def user_parse(tmp_path: Path) -> Path:
    data = {
        "metadata": {"project_name": "shop"},
        "files": {"shop://models/a.sql": {"path": {"project_root": USER_ROOT}}},
        "nodes": {"seed.shop.s": {"root_path": USER_ROOT}},
    }
    path = tmp_path / "user" / "target" / PARTIAL_PARSE_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(msgpack.packb(data, use_bin_type=True))
    return path


def _box(tmp_path: Path, name: str, user_parse: Path | None) -> DbtSandbox:
    scratch = tmp_path / "sandboxes" / name
    (scratch / "logs").mkdir(parents=True, exist_ok=True)
    return DbtSandbox(
        args=["build"], cwd=tmp_path / name, log_path=scratch / "out.log",
        target_dir=scratch / "target", parse_key="lineage", project_dir=tmp_path / name,
        user_parse_file=user_parse,
    )  # fmt: skip


def _seeded(box: DbtSandbox) -> bytes:
    return (box.target_dir / PARTIAL_PARSE_FILE).read_bytes()


def test_a_worker_gets_the_copy_and_then_an_empty_seed(
    tmp_path: Path, user_parse: Path, _patchit_home: Path
) -> None:
    seeds = ParseSeeds()
    first = _box(tmp_path, "c1", user_parse)
    saved = seeds.seed(first, worker_pid=41)
    assert saved is not None
    source = Path(saved["source"])
    assert source.read_bytes() == user_parse.read_bytes()  # not re-rooted: the worker does it
    assert source.is_relative_to(_patchit_home / "sandboxes")  # where the worker can read it
    assert saved["root"] == str(first.project_dir)
    assert b"/home/dana" not in _seeded(first)  # the file dbt reads is re-rooted
    seeds.after(first, DbtOutcome(success=True, parse_mode="partial", saved_parse_kept=True),
                41, saved)  # fmt: skip
    assert seeds.last_mode == "partial"

    second = _box(tmp_path, "c2", user_parse)
    again = seeds.seed(second, worker_pid=41)
    assert again == {**saved, "root": str(second.project_dir),
                     "file": saved["file"].replace("c1", "c2")}  # fmt: skip
    assert _seeded(second) == b""  # the worker said it holds the decoded parse
    # another worker (the first died) has not decoded it: the re-rooted file again
    third = _box(tmp_path, "c3", user_parse)
    assert seeds.seed(third, worker_pid=42) is not None
    assert _seeded(third) != b""
    seeds.close()
    assert not source.exists()


def test_a_copy_changed_since_is_copied_again_and_a_stub_is_never_kept(
    tmp_path: Path, user_parse: Path
) -> None:
    seeds = ParseSeeds()
    first = _box(tmp_path, "c1", user_parse)
    saved = seeds.seed(first, worker_pid=41)
    assert saved is not None
    assert saved["sha256"] == hashlib.sha256(user_parse.read_bytes()).hexdigest()
    Path(saved["source"]).write_bytes(b"written by a run")  # no Landlock: a run could
    second = _box(tmp_path, "c2", user_parse)
    again = seeds.seed(second, worker_pid=41)
    assert again is not None and again["source"] != saved["source"]
    assert Path(again["source"]).read_bytes() == user_parse.read_bytes()
    assert again["sha256"] == saved["sha256"]
    # a run seeded with the empty stub that died before dbt parsed: the stub is not kept
    seeds.after(second, DbtOutcome(success=True, parse_mode="partial", saved_parse_kept=True),
                41, again)  # fmt: skip
    stubbed = _box(tmp_path, "c3", user_parse)
    stub = seeds.seed(stubbed, worker_pid=41)
    assert _seeded(stubbed) == b""
    seeds.after(stubbed, DbtOutcome(success=False), 41, stub)
    assert seeds.last_mode == "unknown"
    seeds.close()


def test_a_parse_dbt_refused_is_not_offered_again(tmp_path: Path, user_parse: Path) -> None:
    seeds = ParseSeeds()
    first = _box(tmp_path, "c1", user_parse)
    saved = seeds.seed(first, worker_pid=41)
    first.log_path.write_text("Unable to do partial parsing because config vars changed\n")
    (first.target_dir / PARTIAL_PARSE_FILE).write_bytes(b"dbt's full parse")
    seeds.after(first, DbtOutcome(success=True, parse_mode="full"), 41, saved)
    assert seeds.last_mode == "full: config vars changed"
    # the same candidate's next run (its scratch dir): its own parse, left in place
    again = _box(tmp_path, "c1", user_parse)
    assert seeds.seed(again, worker_pid=41) is None
    assert _seeded(again) == b"dbt's full parse"
    # another candidate: never the parse a candidate's run wrote (its code could rewrite it),
    # the user's, re-rooted (dbt parses in full again, saying why)
    second = _box(tmp_path, "c2", user_parse)
    assert seeds.seed(second, worker_pid=41) is None
    assert _seeded(second) != b"dbt's full parse" and b"/home/dana" not in _seeded(second)
    assert msgpack.unpackb(_seeded(second))["metadata"] == {"project_name": "shop"}
    seeds.close()


def test_without_a_worker_each_candidate_starts_from_the_users_parse(
    tmp_path: Path, user_parse: Path, _patchit_home: Path
) -> None:
    """A fresh process per run gets the user's parse as it is (it re-roots it as it decodes
    it), named with the hash the process checks; never a parse another run wrote."""
    seeds = ParseSeeds()
    first = _box(tmp_path, "c1", user_parse)
    spec = seeds.seed(first, worker_pid=None)
    file = first.target_dir / PARTIAL_PARSE_FILE
    digest = hashlib.sha256(user_parse.read_bytes()).hexdigest()
    assert spec == {"source": str(file), "sha256": digest, "root": str(first.project_dir),
                    "file": str(file)}  # fmt: skip
    assert _seeded(first) == user_parse.read_bytes()  # rooted at /home/dana: re-rooted later
    file.write_bytes(b"a parse the run rewrote")
    seeds.after(first, DbtOutcome(success=True, parse_mode="partial"), None, spec)
    assert seeds.last_mode == "partial"
    second = _box(tmp_path, "c2", user_parse)
    assert seeds.seed(second, worker_pid=None) is not None
    assert _seeded(second) == user_parse.read_bytes()
    assert not (_patchit_home / "cache").exists()  # nothing kept between candidates
    seeds.close()
    assert list((_patchit_home / "sandboxes").glob(".dbt-failing-parse-*")) == []


def test_a_dead_process_s_parses_are_removed_by_the_next_harness_and_the_sweep(
    tmp_path: Path, user_parse: Path, _patchit_home: Path
) -> None:
    """A process killed holding the failing run's parse (rendered vars, secrets too)."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    area = _patchit_home / "sandboxes"
    left = area / f".dbt-failing-parse-{run_owner(int(dead))}-abc123" / "0.msgpack"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"secrets")
    live = area / f".dbt-failing-parse-{run_owner(os.getppid())}-def456"  # kept
    live.mkdir()
    seeds = ParseSeeds()
    assert seeds.seed(_box(tmp_path, "c1", user_parse), worker_pid=41) is not None
    assert not left.parent.exists()
    assert live.is_dir()
    seeds.close()
    assert [p.name for p in area.glob(".dbt-failing-parse-*")] == [live.name]
    # killed before it closed: the next run's recovery sweep removes its dirs
    kept = _patchit_home / "cache" / f"dbt-partial-parse-{run_owner(int(dead))}-ghi789"
    kept.mkdir(parents=True)
    left.parent.mkdir()
    with Memory.open(_patchit_home) as memory:
        sweep = sweep_dead_runs(_patchit_home, memory, "me")
    assert sweep.sandboxes == 2
    assert not kept.exists() and not left.parent.exists() and live.is_dir()
