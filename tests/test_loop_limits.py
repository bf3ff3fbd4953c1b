"""Sandbox limits inside the real loop: a patched Airflow task that runs forever or opens a
socket is stopped, and the attempt is recorded as a harness limit, not as a failed idea."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from patchit.config import PatchitConfig
from patchit.evidence.model import Evidence
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.loop.loop import Context, HealOutcome, heal
from patchit.memory import Memory
from patchit.patching.base import Edit, FixIt, PatchCandidate, PriorAttempt
from tests.conftest import git
from tests.evidence.airflow_failures import ZOO_DAG, Zoo

pytestmark = pytest.mark.slow

BROKEN = 'return row["amout"] * 100'


class Scripted(FixIt):
    name: ClassVar[str] = "scripted"
    tag: ClassVar[str] = "other"

    def __init__(self, *replacements: str) -> None:
        self.candidates = [
            PatchCandidate(
                strategy="scripted",
                tag=f"idea_{n}",
                rationale=f"idea {n}",
                edits=[Edit(path=ZOO_DAG, search=BROKEN, replace=text)],
            )
            for n, text in enumerate(replacements)
        ]

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        return list(self.candidates)


def heal_load_order(zoo: Zoo, tmp_path: Path, home: Path, strategy: Scripted) -> HealOutcome:
    repo = zoo.copy_repo(tmp_path / "repo")
    event = zoo.event_in("load_order", repo)
    ctx = Context(
        home=home, memory=Memory.open(home), config=PatchitConfig(), strategies=[strategy],
        harnesses=[AirflowHarness(timeout_s=20)],
    )  # fmt: skip
    try:
        return heal(event, ctx)
    finally:
        ctx.close()


def test_runaway_candidate_is_stopped_and_the_next_one_still_tried(
    zoo: Zoo, tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZOO_OUT", str(tmp_path / "out"))
    strategy = Scripted(
        "while True:\n            pass",  # a patch that never returns
        'return row["amount"] * 100',
    )
    outcome = heal_load_order(zoo, tmp_path, _patchit_home, strategy)
    memory = Memory.open(_patchit_home)
    attempts = memory.attempts_for(outcome.incident.id)
    assert [a.outcome for a in attempts] == ["harness_limit", "verified"]
    assert attempts[0].reason.startswith("harness limit hit (time)")
    assert outcome.incident.status == "fixed"
    assert memory.attempt_count(outcome.incident.fingerprint) == 1  # a limit is not an idea


def test_candidate_needing_the_network_cannot_be_verified(
    zoo: Zoo, tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZOO_OUT", str(tmp_path / "out"))
    phone_home = (
        'import socket; socket.create_connection(("203.0.113.7", 443), timeout=5)\n'
        '        return row["amount"] * 100'
    )
    outcome = heal_load_order(
        zoo, tmp_path, _patchit_home, Scripted(phone_home, 'return row["amount"] * 100')
    )
    attempts = Memory.open(_patchit_home).attempts_for(outcome.incident.id)
    assert [a.outcome for a in attempts] == ["harness_limit"]  # no guess after it
    assert "network" in attempts[0].reason
    assert outcome.incident.status == "escalated"
    report = Path(outcome.incident.report_md or "").read_text()
    assert "cannot verify: the unit needs the network" in report
    assert git(Path(str(tmp_path / "repo")), "branch", "--list", "patchit/*") == ""
