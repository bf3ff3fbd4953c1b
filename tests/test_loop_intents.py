"""A revert of the author's intent is never `fixed`: the loop with the partial revert, on a
real script (fast, the FakeHarness runs it with Python) and on real dbt (slow). The incident
ends `escalated` with needs_review, labelled "reverts your change: <intent>" in the report and
in `patchit incidents --json`, and no branch exists."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from patchit.config import PatchitConfig, PolicyConfig
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.harnesses.base import Harness
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.context import Context
from patchit.loop.loop import HealOutcome, heal
from patchit.memory import Memory
from patchit.patching.apply import derive_edits
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.revert import PartialRevertStrategy
from tests.cli.helpers import incidents
from tests.conftest import commit_all, git, user_dbt_events
from tests.evidence.airflow_failures import init_repo, script_failure
from tests.test_loop_revert import script_harness

JOB = "dags/totals.py"
GOOD = textwrap.dedent(
    """\
    rows = [{"amount": 3}, {"amount": 4}]


    def total(rows, scale=1):
        return sum(row["amount"] * scale for row in rows)


    print(total(rows, scale=2))
    """
)
# the change renames the parameter (meant) and leaves the caller behind
RENAMED = GOOD.replace("scale=1", "factor=1").replace("* scale", "* factor")
LABEL = "reverts your change: renamed parameter scale of total to factor in dags/totals.py"


def heal_with(home: Path, event: UniversalFailureEvent, harness: Harness,
              config: PatchitConfig | None = None,
              strategies: list[FixIt] | None = None) -> tuple[HealOutcome, Memory]:  # fmt: skip
    memory = Memory.open(home)
    ctx = Context(home, memory, config or PatchitConfig(),
                  strategies or [PartialRevertStrategy()], [harness])  # fmt: skip
    try:
        return heal(event, ctx), memory
    finally:
        ctx.close()


def renamed_parameter(tmp_path: Path) -> tuple[Path, UniversalFailureEvent]:
    repo = init_repo(tmp_path / "repo")
    (repo / JOB).parent.mkdir(parents=True)
    (repo / JOB).write_text(GOOD)
    commit_all(repo, "totals")
    return repo, script_failure(repo, JOB, RENAMED, "total")


def test_a_revert_of_a_renamed_parameter_ends_needs_review_labelled(
    tmp_path: Path, _patchit_home: Path
) -> None:
    repo, event = renamed_parameter(tmp_path)
    outcome, memory = heal_with(_patchit_home, event, script_harness())
    incident = memory.get_incident(outcome.incident.id)
    assert (incident.status, incident.branch, incident.needs_review) == ("escalated", None, True)
    attempts = memory.attempts_for(incident.id)
    assert attempts[-1].outcome == "needs_review"
    assert LABEL in attempts[-1].reason
    assert git(repo, "branch", "--list", "patchit/*") == ""
    report = json.loads(Path(incident.report_json or "").read_text())
    assert report["reverts"] == LABEL
    assert [i["kind"] for i in report["intents"]] == ["parameter_renamed"]
    assert len(report["forward_tried"]) == len(attempts) - 1  # the reverts that failed first
    md = Path(incident.report_md or "").read_text()
    assert f"## Needs review: {LABEL}" in md
    assert "- renamed parameter scale of total to factor in dags/totals.py" in md
    html = Path(incident.report_md or "").with_suffix(".html").read_text()
    assert 'id="reverts"' in html and "renamed parameter scale of total to factor" in html
    memory.close()
    [row] = incidents()
    assert (row["status"], row["needs_review"], row["review_label"]) == ("escalated", True, LABEL)


def test_policy_revert_allow_lets_the_revert_land(tmp_path: Path, _patchit_home: Path) -> None:
    repo, event = renamed_parameter(tmp_path)
    config = PatchitConfig(policy=PolicyConfig(revert="allow"))
    outcome, memory = heal_with(_patchit_home, event, script_harness(), config)
    assert outcome.incident.status == "fixed" and outcome.incident.branch
    assert "def total(rows, scale=1):" in git(repo, "show", f"{outcome.incident.branch}:{JOB}")
    memory.close()
    [row] = incidents()
    assert row["review_label"] is None


class _Reverts(FixIt):
    """Two reverts of the renamed parameter (the second with a comment besides), then a
    forward fix that fails: what a delta-debugging revert offers after its first held set."""

    name = "scripted_reverts"
    tag = "scripted_reverts"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        def one(tag: str, text: str) -> PatchCandidate:
            return PatchCandidate(strategy=self.name, tag=tag, rationale=tag,
                                  edits=derive_edits(JOB, RENAMED, text))  # fmt: skip

        forward = RENAMED.replace("print(total(rows, scale=2))", "print(total(rows, factr=2))")
        return [one("revert", GOOD), one("revert_noted", "# scale\n" + GOOD),
                one("forward", forward)]  # fmt: skip


def test_after_a_revert_is_held_further_reverts_of_that_intent_spend_no_run(
    tmp_path: Path, _patchit_home: Path
) -> None:
    _repo, event = renamed_parameter(tmp_path)
    outcome, memory = heal_with(_patchit_home, event, script_harness(), strategies=[_Reverts()])
    attempts = memory.attempts_for(outcome.incident.id)
    assert [(a.tag, a.outcome) for a in attempts] == [
        ("revert", "needs_review"), ("revert_noted", "refused"), ("forward", "failed"),
    ], [a.reason for a in attempts]  # fmt: skip
    assert attempts[1].reason.startswith(
        "not verified: it reverts your change: renamed parameter scale of total to factor"
    )
    assert "as scripted_reverts (revert) does, which passed and is held" in attempts[1].reason
    incident = memory.get_incident(outcome.incident.id)
    assert (incident.status, incident.needs_review) == ("escalated", True)
    report = json.loads(Path(incident.report_json or "").read_text())
    assert report["reverts"] == LABEL
    assert [f.split(":")[0] for f in report["forward_tried"]] == ["scripted_reverts (`forward`)"]
    memory.close()


# -- real dbt -------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_dbt_a_renamed_staging_column_is_not_reverted_onto_a_branch(
    shop_repo: Path, _patchit_home: Path
) -> None:
    staging = shop_repo / "models/staging/stg_orders.sql"
    text = staging.read_text()
    staging.write_text(text.replace("    customer_id,\n", "    customer_id as buyer_id,\n"))
    commit_all(shop_repo, "stg_orders: the customer is the buyer")
    code, events = user_dbt_events(shop_repo, ["build"])
    assert code == 1
    [event] = [e for e in events if e.unit_id == "model.shop.orders"]
    outcome, memory = heal_with(_patchit_home, event, DbtHarness(timeout_s=300))
    incident = memory.get_incident(outcome.incident.id)
    attempts = memory.attempts_for(incident.id)
    label = "reverts your change: renamed column customer_id to buyer_id in stg_orders"
    assert (incident.status, incident.branch, incident.needs_review) == ("escalated", None, True)
    assert [a.outcome for a in attempts][-1] == "needs_review", [
        (a.outcome, a.reason) for a in attempts
    ]
    assert label in attempts[-1].reason
    assert git(shop_repo, "branch", "--list", "patchit/*") == ""
    memory.close()
    [row] = incidents()
    assert (row["status"], row["needs_review"], row["review_label"]) == ("escalated", True, label)


def test_a_revert_held_for_review_is_verified_again_once_the_policy_allows_it(
    tmp_path: Path, _patchit_home: Path
) -> None:
    """A diff that ended needs_review passed: it is no repeated failure. After the operator
    allows reverts, `patchit heal ID` heals with it instead of refusing it from memory."""
    repo, event = renamed_parameter(tmp_path)
    held, memory = heal_with(_patchit_home, event, script_harness())
    assert held.incident.status == "escalated"
    memory.transition(held.incident.id, "retry")  # `patchit heal ID`, the policy relaxed
    memory.close()
    config = PatchitConfig(policy=PolicyConfig(revert="allow"))
    again = event.model_copy(update={"event_id": "after-the-policy-changed"})
    outcome, memory = heal_with(_patchit_home, again, script_harness(), config)
    assert outcome.incident.id == held.incident.id
    attempts = memory.attempts_for(outcome.incident.id)
    assert not any(a.reason.startswith("repeated diff") for a in attempts)
    assert attempts[-1].outcome == "verified"
    assert outcome.incident.status == "fixed" and outcome.incident.branch
    assert "def total(rows, scale=1):" in git(repo, "show", f"{outcome.incident.branch}:{JOB}")
    memory.close()
