"""Two failed candidates that each did half are tried together (found on
jaffle_shop_duckdb: a column removed in one unmerged commit, a model renamed in the next; the
ref fix failed on the removed column, the revert of the removal on the rename; the run ended
`failed`; joined and held for review there once this was built)."""

from __future__ import annotations

from patchit.evidence.intents import Intent
from patchit.harnesses.base import Verification
from patchit.loop.combine import STRATEGY, joined_candidates
from patchit.loop.trial import Trial
from patchit.patching.base import Edit, PatchCandidate
from tests.test_still_failing import ORDERS, OUTPUT

REMOVED = Intent(kind="column_removed", path="models/staging/stg_payments.sql",
                 old="payment_method",
                 description="removed column payment_method from stg_payments")  # fmt: skip
RENAMED = Intent(kind="model_renamed", path="models/staging/stg_sales_orders.sql",
                 old="stg_orders", new="stg_sales_orders",
                 description="renamed model stg_orders to stg_sales_orders")  # fmt: skip


def _trial(name: str, path: str, output: str = OUTPUT, reverts: frozenset[str] = frozenset(),
           passed: bool = False, review: str = "") -> Trial:  # fmt: skip
    candidate = PatchCandidate(strategy=name, tag=name, edits=[Edit(path=path, search="a",
                               replace="b")], rationale=name, review=review)  # fmt: skip
    result = Verification(passed=passed, harness="dbt", command="dbt build", output=output,
                          failures=[] if passed else [ORDERS])  # fmt: skip
    return Trial(candidate, "diff", result=result, reverts=reverts)


FORWARD = _trial("dbt_fix_ref", "models/orders.sql")
BACK = _trial("partial_revert", "models/staging/stg_payments.sql", output="Compilation Error",
              reverts=frozenset({REMOVED.description}),
              review=f"reverts your change: {REMOVED.description}; it restores a line")  # fmt: skip


def test_a_forward_half_and_the_revert_of_what_it_still_fails_on_are_joined() -> None:
    [joined] = joined_candidates([FORWARD, BACK], [RENAMED, REMOVED])
    assert joined.strategy == STRATEGY and joined.tag == "dbt_fix_ref+partial_revert"
    assert [e.path for e in joined.edits] == [
        FORWARD.candidate.edits[0].path,
        BACK.candidate.edits[0].path,
    ]
    assert "left model.jaffle_shop.orders failing on payment_method" in joined.rationale
    assert REMOVED.description in joined.rationale
    # the trial labels the joint candidate afresh; the other reviews are kept
    assert joined.review == "it restores a line"


def test_nothing_is_joined_without_a_matching_pair() -> None:
    # the forward half fails on something the change did not remove
    other = _trial("dbt_fix_ref", "models/orders.sql", OUTPUT.replace("payment_method", "amt"))
    assert joined_candidates([other, BACK], [RENAMED, REMOVED]) == []
    # the revert undoes another intent
    back = _trial("partial_revert", "models/staging/stg_payments.sql",
                  reverts=frozenset({RENAMED.description}))  # fmt: skip
    assert joined_candidates([FORWARD, back], [RENAMED, REMOVED]) == []
    # both edit one file
    same = _trial("partial_revert", "models/orders.sql", reverts=frozenset({REMOVED.description}))
    assert joined_candidates([FORWARD, same], [RENAMED, REMOVED]) == []
    # a revert that passed alone needs no forward half; a forward half that reverts is no half
    passed = _trial("partial_revert", "models/staging/stg_payments.sql", passed=True,
                    reverts=frozenset({REMOVED.description}))  # fmt: skip
    assert joined_candidates([FORWARD, passed], [RENAMED, REMOVED]) == []
    reverting = _trial("dbt_fix_ref", "models/orders.sql",
                       reverts=frozenset({RENAMED.description}))  # fmt: skip
    assert joined_candidates([reverting, BACK], [RENAMED, REMOVED]) == []
    # without the change's intents there is nothing to match
    assert joined_candidates([FORWARD, BACK], []) == []


def test_joined_candidates_are_not_joined_again_and_are_few() -> None:
    [joined] = joined_candidates([FORWARD, BACK], [REMOVED])
    trial = Trial(joined, "diff", result=FORWARD.result)
    assert len(joined_candidates([FORWARD, BACK, trial], [REMOVED])) == 1
    forwards = [_trial(f"fix{n}", f"models/m{n}.sql") for n in range(5)]
    assert len(joined_candidates([*forwards, BACK], [REMOVED])) == 2
