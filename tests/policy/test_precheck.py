"""Pre-check: policy first, then the attempt memory (repeated diffs, failed buckets)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.config import PolicyConfig
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.memory import Memory
from patchit.patching.base import Edit, PatchCandidate
from patchit.patching.diffs import unified_diff
from patchit.policy import precheck

ORDERS = "select\n    id,\n    nme\nfrom {{ ref('stg_orders') }}\n"
FP = "0123456789abcdef"


def rename(
    tag: str = "rename_column", to: str = "name", path: str = "models/orders.sql"
) -> PatchCandidate:
    return PatchCandidate(
        strategy="binder_rename",
        tag=tag,
        edits=[Edit(path=path, search="nme", replace=to)],
        rationale="binder candidates",
    )


def diff_of(repo: Path, cand: PatchCandidate) -> str:
    edit = cand.edits[0]
    before = (repo / edit.path).read_text()
    return unified_diff(edit.path, before, before.replace(edit.search, edit.replace, 1))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo/models").mkdir(parents=True)
    (tmp_path / "repo/models/orders.sql").write_text(ORDERS)
    (tmp_path / "repo/.env").write_text("nme=1\n")
    return tmp_path / "repo"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "home") as mem:
        yield mem


@pytest.fixture
def incident_id(memory: Memory) -> str:
    ev = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.orders"
    )
    return memory.create_incident(ev, FP, "ck").id


def test_a_fresh_candidate_passes(repo: Path, memory: Memory) -> None:
    cand = rename()
    assert precheck(cand, diff_of(repo, cand), FP, repo, PolicyConfig(), memory) is None


def test_policy_is_checked_first(repo: Path, memory: Memory, incident_id: str) -> None:
    cand = rename(path=".env")
    memory.record_attempt(incident_id, FP, cand, "whatever", "failed")
    reason = precheck(cand, "whatever", FP, repo, PolicyConfig(), memory)
    assert reason == "policy: .env: matches deny glob '*.env*'"


def test_a_diff_tried_before_is_refused(repo: Path, memory: Memory, incident_id: str) -> None:
    cand = rename()
    memory.record_attempt(incident_id, FP, cand, diff_of(repo, cand), "failed")
    # the same change, proposed by another strategy under another tag, after the file moved
    (repo / "models/orders.sql").write_text("-- moved down\n\n" + ORDERS)
    again = rename(tag="llm_fix")
    reason = precheck(again, diff_of(repo, again), FP, repo, PolicyConfig(), memory)
    assert reason is not None and reason.startswith("repeated diff ")
    assert FP in reason
    # another failure (fingerprint) may try it
    assert precheck(again, diff_of(repo, again), "other-fp", repo, PolicyConfig(), memory) is None


def test_a_refused_diff_was_not_tried(repo: Path, memory: Memory, incident_id: str) -> None:
    cand = rename()
    memory.record_attempt(incident_id, FP, cand, diff_of(repo, cand), "refused", reason="policy")
    assert precheck(cand, diff_of(repo, cand), FP, repo, PolicyConfig(), memory) is None


def test_a_failed_strategy_bucket_is_refused(repo: Path, memory: Memory, incident_id: str) -> None:
    first = rename(to="name")
    memory.record_attempt(incident_id, FP, first, diff_of(repo, first), "failed")
    variant = rename(to="names")
    reason = precheck(variant, diff_of(repo, variant), FP, repo, PolicyConfig(), memory)
    assert reason == f"strategy bucket 'rename_column' already failed for fingerprint {FP}"
    other_bucket = rename(tag="fix_ref", to="names")
    assert (
        precheck(other_bucket, diff_of(repo, other_bucket), FP, repo, PolicyConfig(), memory)
        is None
    )
