"""The partial revert: its contract, and its delta debugging driven round by round against a
fake oracle (the loop's memory is played by a list of `PriorAttempt`s, the harness by a
predicate on the reverted file). Real git, real Python failures; no dbt."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.memory.diffs import diff_hash
from patchit.patching.apply import preview_edits
from patchit.patching.base import PatchCandidate, PriorAttempt, ProposalRequest, Strategy
from patchit.patching.delta import build_plan, next_set, revert_texts, split_change
from patchit.patching.diffs import unified_diff
from patchit.patching.revert import (
    MAX_RUNS,
    BreakingChange,
    PartialRevertStrategy,
    describe,
    review_reason,
)
from tests.conftest import commit_all
from tests.evidence.airflow_failures import init_repo, script_failure
from tests.patching.contract import StrategyContract

JOB = "dags/totals.py"
GOOD = textwrap.dedent(
    """\
    rows = [{"amount": 3, "day": "mon"}, {"amount": 4, "day": "tue"}]


    def total(rows):
        return sum(row["amount"] for row in rows)


    print(total(rows))
    """
)
# the change scales the total (meant) and misspells the key on the very line it rewrote
SCALED = GOOD.replace("def total(rows):", "def total(rows, scale=1):").replace(
    'sum(row["amount"] for row in rows)', 'sum(row["amout"] * scale for row in rows)'
)


def failing_evidence(tmp_path: Path, good: str, broken: str, rel: str = JOB) -> Evidence:
    repo = init_repo(tmp_path / "repo")
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(good)
    commit_all(repo, "good")
    event = script_failure(repo, rel, broken, "total")
    return gather_airflow_evidence(event, repo)


Oracle = Callable[[str], bool]


def drive(
    strategy: Strategy, evidence: Evidence, oracle: Oracle, *, max_attempts: int = 6,
    history: list[PriorAttempt] | None = None, screen: Oracle | None = None,
) -> tuple[list[PatchCandidate], list[PriorAttempt]]:  # fmt: skip
    """The loop in miniature: ask round after round, 'verify' each candidate with the oracle
    on the reverted text (unless `screen` rejects the text first: screened out, no run),
    record the attempt the way memory does (diff hash of the trial's diff, the run's error
    as its output), stop at the first pass, at max attempts, or when the strategy wants no
    more."""
    history = list(history or [])
    config = PatchitConfig.model_validate({"loop": {"max_attempts": max_attempts}})
    root = Path(evidence.repo_root)
    proposed: list[PatchCandidate] = []
    for round_no in range(1, 40):
        request = ProposalRequest(evidence, list(history), round_no, "inc", config)
        proposal = strategy.propose(request)
        for candidate in proposal.candidates:
            previews = preview_edits(root, candidate.edits)
            diff = "".join(unified_diff(p, b, a) for p, (b, a) in previews.items())
            proposed.append(candidate)
            text = previews[JOB][1]
            passed = oracle(text)
            outcome = ("needs_review" if candidate.review else "verified") if passed else "failed"
            if screen is not None and not screen(text):
                outcome = "screened_out"
            history.append(PriorAttempt(diff_hash=diff_hash(diff), tag=candidate.tag,
                                        outcome=outcome, diff=diff,
                                        output=error_of(text)))  # fmt: skip
            if outcome == "verified":
                return proposed, history
            if sum(h.outcome not in ("refused", "screened_out") for h in history) >= max_attempts:
                return proposed, history
        if not proposal.more:
            break
    return proposed, history


def error_of(text: str) -> str:
    """What running the script says: "" when it runs, else its exception."""
    scope: dict[str, object] = {"print": lambda *_: None}
    try:
        exec(compile(text, JOB, "exec"), scope)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def runs(text: str) -> bool:
    """The real oracle of these scripts: does the file run?"""
    return error_of(text) == ""


# -- the contract ---------------------------------------------------------------------------


@pytest.fixture
def strategy() -> Strategy:
    return PartialRevertStrategy()


@pytest.fixture
def evidence(tmp_path: Path) -> Evidence:
    return failing_evidence(tmp_path, GOOD, SCALED)


@pytest.fixture
def unrelated_evidence(tmp_path: Path) -> Evidence:
    """A failure whose file the last commit did not change (another file was)."""
    repo = init_repo(tmp_path / "other")
    (repo / "dags" / "notes.md").parent.mkdir(parents=True)
    (repo / "dags" / "notes.md").write_text("v1\n")
    commit_all(repo, "notes")
    event = script_failure(repo, JOB, GOOD.replace('"amount"]', '"amout"]'), "total")
    (repo / "dags" / "notes.md").write_text("v2\n")
    sha = commit_all(repo, "notes v2")
    return gather_airflow_evidence(event.model_copy(update={"commit": sha}), repo)


class TestPartialRevertContract(StrategyContract):
    pass


def test_ranked_last_within_tier_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    from patchit import plugins
    from patchit.patching import registry

    points = [
        EntryPoint("partial_revert", "patchit.patching.revert:PartialRevertStrategy", "g"),
        EntryPoint("python_fix_call", "patchit.patching.fixits.python_calls:FixCallStrategy", "g"),
        EntryPoint("dbt_fix_ref", "patchit.patching.fixits.refs:FixRefStrategy", "g"),
        EntryPoint("llm", "patchit.patching.llm.strategy:LlmStrategy", "g"),
    ]
    points.append(EntryPoint("airflow3_upgrade", "patchit.patching.fixits.airflow3:"
                             "Airflow3UpgradeStrategy", "g"))  # fmt: skip
    points.append(EntryPoint("follow_message", "patchit.patching.fixits.message:"
                             "FollowMessageStrategy", "g"))  # fmt: skip
    monkeypatch.setattr(plugins, "entry_points", lambda group: points)
    names = [s.name for s in registry.load_strategies()]
    assert names == [
        "dbt_fix_ref", "python_fix_call", "airflow3_upgrade", "follow_message",
        "partial_revert", "llm",
    ]  # fmt: skip


# -- delta debugging against a fake oracle --------------------------------------------------


def test_token_revert_keeps_the_rest_of_the_rewritten_line(evidence: Evidence) -> None:
    proposed, history = drive(PartialRevertStrategy(), evidence, runs)
    assert history[-1].outcome == "verified" and len(proposed) == 1
    [edit] = proposed[0].edits
    assert edit.replace.strip() == 'return sum(row["amount"] * scale for row in rows)'
    rationale = proposed[0].rationale
    assert "`amout` -> `amount` (rest of the line kept)" in rationale
    assert "kept 2 other edit(s)" in rationale
    assert "`def total(rows):` -> `def total(rows, scale=1):`" in rationale
    assert evidence.event.commit and evidence.event.commit[:12] in rationale
    assert proposed[0].review == ""


def test_the_result_is_one_minimal_and_no_diff_is_proposed_twice(tmp_path: Path) -> None:
    # four edits; the run needs two of them back: the key and the divisor's name
    good = GOOD.replace("print(total(rows))", "unit = 100\nprint(total(rows) / unit)")
    broken = (
        good.replace('"amount"]', '"amout"]')
        .replace("/ unit", "/ units")
        .replace('"day": "mon"', '"day": "monday"')
        .replace("def total(rows):", "def total(rows):  # sum of amounts")
    )
    evidence = failing_evidence(tmp_path, good, broken)
    proposed, history = drive(PartialRevertStrategy(), evidence, runs, max_attempts=20)
    assert history[-1].outcome == "verified"
    assert len({h.diff_hash for h in history}) == len(history)
    winner = preview_edits(Path(evidence.repo_root), proposed[-1].edits)[JOB][1]
    assert runs(winner) and "monday" in winner and "# sum of amounts" in winner
    # 1-minimal: putting back any one of the reverted pieces breaks the run again
    change = split_change(JOB, good, broken)
    atoms = change.atoms()
    subsets = (
        frozenset(a for n, a in enumerate(atoms) if mask >> n & 1)
        for mask in range(1, 2 ** len(atoms))
    )
    chosen = next(s for s in subsets if revert_texts([change], s).get(JOB) == winner)
    assert len(chosen) == 2 and len(proposed) <= MAX_RUNS
    for atom in chosen:
        assert not runs(revert_texts([change], chosen - {atom}).get(JOB, broken))


def test_screened_out_sets_count_as_failed_and_cost_no_run(tmp_path: Path) -> None:
    good = GOOD.replace("print(total(rows))", "unit = 100\nprint(total(rows) / unit)")
    broken = (
        good.replace('"amount"]', '"amout"]')
        .replace("/ unit", "/ units")
        .replace('"day": "mon"', '"day": "monday"')
        .replace("def total(rows):", "def total(rows):  # sum of amounts")
    )
    evidence = failing_evidence(tmp_path, good, broken)

    def screen(text: str) -> bool:  # as a binder would: `units` is bound nowhere
        return "/ units" not in text

    _, history = drive(PartialRevertStrategy(), evidence, runs, max_attempts=20, screen=screen)
    assert history[-1].outcome == "verified"
    outcomes = [h.outcome for h in history]
    assert "screened_out" in outcomes
    assert sum(o != "screened_out" for o in outcomes) <= MAX_RUNS  # only runs spend the budget
    assert len({h.diff_hash for h in history}) == len(history)


def test_the_run_budget_is_respected(evidence: Evidence) -> None:
    proposed, history = drive(PartialRevertStrategy(), evidence, lambda _text: False)
    assert 0 < len(proposed) <= MAX_RUNS
    assert len({h.diff_hash for h in history}) == len(history)
    # attempts other strategies spent count against the fingerprint's max_attempts
    spent = [PriorAttempt(diff_hash=f"x{i}", tag="rename_key", outcome="failed") for i in range(5)]
    proposed, _ = drive(PartialRevertStrategy(), evidence, lambda _t: False, history=spent)
    assert len(proposed) == 1


def test_no_run_is_spent_once_another_strategys_revert_is_held(evidence: Evidence) -> None:
    # a deleted model restored: it passed, reverts an intent, and is held for review
    held = PriorAttempt(diff_hash="r", tag="restore_deleted", outcome="needs_review",
                        reason="needs review: reverts your change: deleted file m.sql")  # fmt: skip
    proposed, _ = drive(PartialRevertStrategy(), evidence, lambda _t: False, history=[held])
    assert proposed == []
    # its own held sets do not stop it (a smaller set may revert a slip only), nor does a
    # held candidate the operator's policy lets land
    own = held.model_copy(update={"tag": "partial_revert:abc"})
    assert drive(PartialRevertStrategy(), evidence, lambda _t: False, history=[own])[0]
    config = PatchitConfig.model_validate({"policy": {"revert": "allow"}})
    request = ProposalRequest(evidence, [held], 1, "inc", config)
    assert PartialRevertStrategy().propose(request).candidates


def test_a_diff_already_in_memory_is_not_proposed_again(evidence: Evidence) -> None:
    first, history = drive(PartialRevertStrategy(), evidence, lambda _text: False)
    again, _ = drive(PartialRevertStrategy(), evidence, lambda _text: False, history=history)
    seen = {c.rationale for c in first}
    assert all(c.rationale not in seen for c in again)


def test_dropping_code_the_change_added_is_marked_for_review(tmp_path: Path) -> None:
    # the change adds a new output (a maximum) and that new line is the broken one
    broken = GOOD.replace(
        "print(total(rows))", 'print(total(rows))\nprint(max(row["amout"] for row in rows))'
    )
    evidence = failing_evidence(tmp_path, GOOD, broken)
    proposed, history = drive(PartialRevertStrategy(), evidence, runs)
    assert [h.outcome for h in history] == ["needs_review"]
    assert "drops code the breaking change added" in proposed[0].review
    assert "print(max(" in proposed[0].review


def test_dropping_an_import_nothing_uses_any_more_needs_no_review() -> None:
    base = "import os\n\nprint(os.sep)\n"
    fail = "import os\nimport json\n\nprint(os.sepp)\n"
    change = split_change("job.py", base, fail)
    whole = frozenset(change.atoms())
    texts = revert_texts([change], whole)
    assert texts["job.py"] == base
    assert review_reason([change], whole, texts) == ""
    # the json.dumps the change wrote around it is more than a slip: taking it out is reviewed
    wrapped = split_change(
        "job.py", base, fail.replace("print(os.sepp)", "print(json.dumps(os.sepp))")
    )
    every = frozenset(wrapped.atoms())
    assert "rewrote (job.py:4" in review_reason([wrapped], every, revert_texts([wrapped], every))
    sql = split_change("m.sql", "select a\nfrom t\n", "select a,\n    b\nfrom t\n")
    every = frozenset(sql.atoms())
    assert "drops code" in review_reason([sql], every, revert_texts([sql], every))


def test_plan_goes_from_tokens_to_lines_to_hunks_and_skips_what_cannot_pass() -> None:
    base = "select\n    amount as total,\n    status\nfrom orders\n"
    fail = "select\n    amout as total_amount,\n    status,\n    channel\nfrom orders\n"
    change = split_change("m.sql", base, fail)
    plan = build_plan([change], lambda _p, slot: int("amout" in slot.fail), {"amout"})
    texts = [revert_texts([change], s)["m.sql"] for s in plan]
    assert texts[0] == fail.replace("amout", "amount")  # the named token alone
    assert texts[1] == fail.replace("total_amount", "total")  # the other token of that line
    assert texts[2] == fail.replace("amout as total_amount", "amount as total")  # the line
    assert texts[-1] == base  # the whole hunk last
    # a set inside a failed one is skipped: the line failed, so its tokens alone are not tried
    assert next_set(plan, {plan[2]: "failed"}) == plan[3]


def test_a_token_group_that_would_unbalance_the_line_is_not_tried_alone() -> None:
    base = "    cast(cancelled_on as date) as cancelled_on,\n"
    fail = "    cast(coalesce(cancelled_on, 'never') as date) as cancelled_on,\n"
    change = split_change("s.sql", base, fail)
    plan = build_plan([change], lambda _p, _s: 2, {"never"})
    assert len(change.atoms()) == 2
    assert revert_texts([change], plan[0])["s.sql"] == base  # the line whole, first


def test_the_rationale_names_a_blank_line_instead_of_quoting_it() -> None:
    change = split_change("m.sql", "select a\nfrom t\n", "select a\n\nfrom tt\n")
    every = frozenset(change.atoms())
    words = describe(BreakingChange("a" * 40, "last good run", "b" * 40, [change]), every)
    assert "a blank line" in words and "` `" not in words and "``" not in words, words


@pytest.mark.parametrize(
    ("base", "fail"),
    [
        ("    round(net, 2) as net,\n", "    round(net, 2) as net\n"),  # a dropped comma
        ("  - name: id\n", " - name: id\n"),  # an indent
        ('    values: ["sepa", "card"]\n', '    values: ["sepa, "card"]\n'),  # a lost quote
        ("    sum(amount) as revenue,\n", "    sum(amout) as revenue,\n"),  # a typo
    ],
)
def test_putting_back_a_slip_needs_no_review(base: str, fail: str) -> None:
    change = split_change("m.sql", f"select\n{base}from t\n", f"select\n{fail}from t\n")
    every = frozenset(change.atoms())
    assert review_reason([change], every, revert_texts([change], every)) == ""


def test_putting_back_a_rewrite_needs_review() -> None:
    """Found on jaffle_shop_duckdb: `status` rewritten as a CASE that maps returned orders to
    'refunded' failed the accepted_values test; the partial revert put `status` back and was
    called fixed, the author's mapping gone."""
    base = "select\n    order_id,\n    status\nfrom orders\n"
    fail = base.replace(
        "    status\n",
        "    case when status = 'returned' then 'refunded' else status end as status\n",
    )
    change = split_change("models/staging/stg_orders.sql", base, fail)
    every = frozenset(change.atoms())
    why = review_reason([change], every, revert_texts([change], every))
    assert why.startswith(
        "it undoes what the breaking change rewrote (models/staging/stg_orders.sql:3"
    )
    assert (
        "`case when status = 'returned' then 'refunded' else status end as status` -> `status`"
        in why
    )


def test_a_rewrite_is_put_back_as_a_fix_only_when_the_code_did_not_run(tmp_path: Path) -> None:
    """The review of a rewrite is for a check that failed on what the code computes (a dbt
    data test, status `fail`); code that raised is changed back as before."""
    good = "rows = [1, 2]\nprint(sum(rows))\n"
    broken = "rows = [1, 2]\nprint(sum(r.amount for r in rows))\n"  # a rewrite, and it raises
    raised = failing_evidence(tmp_path, good, broken)
    proposed, history = drive(PartialRevertStrategy(), raised, lambda text: text == good)
    assert history[-1].outcome == "verified" and proposed[-1].review == ""
    failed = raised.model_copy(update={"event": raised.event.model_copy(update={"status": "fail"})})
    proposed, history = drive(PartialRevertStrategy(), failed, lambda text: text == good)
    assert history[-1].outcome == "needs_review"
    assert "undoes what the breaking change rewrote" in proposed[-1].review
