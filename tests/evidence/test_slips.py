"""The slip judgement: a near name is a typo of another, or a different word."""

import pytest

from patchit.evidence.similarity import DEFAULT_MIN_RATIO, name_ratio
from patchit.evidence.slips import edit_distance, judge_slip, split_words


@pytest.mark.parametrize(
    ("old", "new", "word"),
    [
        ("bill_address_key", "ship_address_key", "`bill` -> `ship`"),
        ("subscription_start_date", "subscription_end_date", "`start` -> `end`"),
        ("min_invoice_usd", "max_invoice_usd", "`min` -> `max`"),
        ("credit_amount_cents", "debit_amount_cents", "`credit` -> `debit`"),
        ("valid_from_date", "valid_to_date", "`from` -> `to`"),
        ("monthly_gross_revenue_usd", "monthly_net_revenue_usd", "`gross` -> `net`"),
        ("billAddressKey", "shipAddressKey", "`bill` -> `ship`"),  # camelCase words
        ("vat_cents", "tax_cents", "`vat` -> `tax`"),
        ("address_line_1", "address_line_2", "`1` -> `2`"),
    ],
)
def test_a_word_swapped_for_another_is_not_a_slip(old: str, new: str, word: str) -> None:
    verdict = judge_slip(old, new)
    assert not verdict.slip
    assert verdict.why.startswith("a different ") and word in verdict.why


def test_the_near_pairs_of_the_issue_pass_the_ratio_bar_and_still_are_no_slip() -> None:
    # nearest() would pick each of them: the ratio is no evidence of a typo
    for old, new in [
        ("bill_address_key", "ship_address_key"),
        ("subscription_start_date", "subscription_end_date"),
        ("min_invoice_usd", "max_invoice_usd"),
        ("credit_amount", "debit_amount"),
        ("monthly_gross_revenue_usd", "monthly_net_revenue_usd"),
    ]:
        assert name_ratio(old, new) >= DEFAULT_MIN_RATIO
        assert not judge_slip(old, new).slip


def test_a_general_word_change_is_caught_without_the_list() -> None:
    # neither word is listed: the distance of the word, not of the whole name, decides
    verdict = judge_slip("warehouse_city_code", "customer_city_code")
    assert not verdict.slip and "`warehouse` -> `customer`" in verdict.why


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("nme", "name"),
        ("custmer_id", "customer_id"),
        ("stauts", "status"),  # two neighbours swapped: one edit
        ("amout", "amount"),
        ("frist_name", "first_name"),
        ("amount_nat", "amount_net"),
        ("amount_nat", "amount_vat"),
        ("DictReadr", "DictReader"),
        ("cents_to_dolars", "cents_to_dollars"),
        ("stg_order", "stg_orders"),
        ("Order_Date", "order_date"),  # case and separators only
        ("customerid", "customer_id"),
        ("custmer_nme", "customer_name"),  # two slips, one in each word
    ],
)
def test_real_typos_are_slips(old: str, new: str) -> None:
    assert judge_slip(old, new).slip, judge_slip(old, new).why


def test_more_than_a_typo_over_several_words_is_not_a_slip() -> None:
    assert not judge_slip("custmr_nme", "customer_name").slip  # 2 + 1 edits


def test_a_word_added_or_dropped_is_another_name() -> None:
    verdict = judge_slip("amount", "amount_usd")
    assert not verdict.slip and "`usd`" in verdict.why
    assert not judge_slip("x_pos", "pos").slip


def test_short_words_allow_no_edit() -> None:
    assert not judge_slip("in_qty", "on_qty").slip
    assert judge_slip("id_qty", "id_qty").slip


def test_words_and_distance() -> None:
    assert split_words("billAddress_key2") == ["bill", "address", "key", "2"]
    assert split_words("HTTPServer.port") == ["http", "server", "port"]
    assert edit_distance("stauts", "status") == 1
    assert edit_distance("bill", "ship") == 4
    assert edit_distance("", "abc") == 3
    assert edit_distance("credit", "debit") == 3
