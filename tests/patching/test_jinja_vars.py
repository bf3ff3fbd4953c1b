"""A Jinja variable the change renamed, followed to the reads it left (found trying
dbt-labs/jaffle_shop_duckdb: `{% set payment_methods %}` renamed `methods` with one loop
left; Jinja read the old name as empty, and the partial revert that put it back was called
fixed, no intent said so). Text fixtures for the rewrite and the intent; real git for the
change."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.intents import read_intents, reverted_intents
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.jinja_vars import FollowJinjaVarRenameStrategy, follow_jinja_name
from tests.conftest import commit_all
from tests.evidence.airflow_failures import init_repo
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import repo_evidence

PATH = "models/orders.sql"
GOOD = (
    "{% set payment_methods = ['credit_card', 'coupon'] %}\n"
    "with payments as (\n"
    "    select order_id,\n"
    "        {% for m in payment_methods -%}\n"
    "        sum(case when method = '{{ m }}' then amount end) as {{ m }}_amount,\n"
    "        {% endfor -%}\n"
    "        sum(amount) as total\n"
    "    from {{ ref('stg_payments') }} group by 1\n"
    ")\n"
    "select order_id,\n"
    "    {% for m in payment_methods %}{{ m }}_amount, {% endfor %}\n"
    "    '{{ \"payment_methods\" }}' as label, {{ config.payment_methods }} as c,\n"
    "    total from payments -- payment_methods\n"
)
# the change renames the variable and the second loop, not the first
BROKEN = GOOD.replace("{% set payment_methods =", "{% set methods =").replace(
    "{% for m in payment_methods %}", "{% for m in methods %}"
)
FIXED = BROKEN.replace("{% for m in payment_methods -%}", "{% for m in methods -%}")


def test_the_reads_left_read_the_new_name_and_nothing_else() -> None:
    # the string, the attribute `config.payment_methods` and the SQL comment keep the old name
    assert follow_jinja_name(BROKEN, "payment_methods", "methods") == FIXED


@pytest.mark.parametrize(
    "text",
    [
        FIXED,  # nothing reads the old name
        GOOD,  # the old name is still set; the new one is not
        BROKEN.replace("{% set methods", "{% set payment_methods = [] %}{% set methods"),
        BROKEN.replace("{% for m in methods %}", "{% for payment_methods in methods %}"),
        "{% macro f(payment_methods) %}{% set methods = 1 %}{{ payment_methods }}{% endmacro %}",
    ],
)
def test_no_rewrite_where_the_old_name_is_bound_or_unread(text: str) -> None:
    assert follow_jinja_name(text, "payment_methods", "methods") is None


def test_the_rename_is_an_intent_and_putting_it_back_reverts_it() -> None:
    [intent] = [i for i in read_intents([(PATH, GOOD, BROKEN)], [])
                if i.kind == "jinja_var_renamed"]  # fmt: skip
    assert (intent.old, intent.new) == ("payment_methods", "methods")
    assert intent.description == "renamed Jinja variable payment_methods to methods in orders"
    assert reverted_intents([intent], {PATH: (BROKEN, GOOD)}) == [intent]
    assert reverted_intents([intent], {PATH: (BROKEN, FIXED)}) == []
    # a new value is no rename; a one-character slip is no intent
    other = BROKEN.replace("['credit_card', 'coupon']", "['card']", 1)
    assert not [i for i in read_intents([(PATH, GOOD, other)], []) if i.kind.startswith("jinja")]
    slip = GOOD.replace("{% set payment_methods =", "{% set payment_method =")
    assert not [i for i in read_intents([(PATH, GOOD, slip)], []) if i.kind.startswith("jinja")]


def _repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "shop")
    (repo / "models").mkdir(parents=True)
    (repo / PATH).write_text(GOOD)
    commit_all(repo, "good")
    (repo / PATH).write_text(BROKEN)
    commit_all(repo, "orders: a shorter name for the methods")
    return repo


MESSAGE = 'Binder Error: Values list "payments" does not have a column named "credit_card_amount"'


def _evidence(repo: Path, message: str = MESSAGE) -> Evidence:
    return repo_evidence(repo, PATH, message, "model.shop.orders")


def test_the_strategy_follows_the_rename_the_change_made(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (candidate,) = FollowJinjaVarRenameStrategy().fix(_evidence(repo), [])
    assert candidate.follows == {}  # a variable names no test: no test is renamed with it
    assert candidate.review == "" and "the rename kept" in candidate.rationale
    apply_edits(repo, candidate.edits)
    assert (repo / PATH).read_text() == FIXED


class TestFollowJinjaVarRenameContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return FollowJinjaVarRenameStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        return _evidence(_repo(tmp_path))

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        repo = init_repo(tmp_path / "other")
        (repo / "models").mkdir(parents=True)
        (repo / PATH).write_text(GOOD)
        commit_all(repo, "good")
        (repo / PATH).write_text(GOOD.replace("sum(amount)", "sum(amout)"))
        commit_all(repo, "a typo")
        return _evidence(repo, 'Referenced column "amout" not found in FROM clause!')
