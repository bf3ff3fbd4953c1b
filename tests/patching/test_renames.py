"""Renames the breaking change made, read from its two sides (no dbt, no Airflow)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from patchit.patching.renames import ChangedFile, Rename, changed_texts, find_renames
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo

STG = "select invoice_id, amount_cents\nfrom {{ ref('raw_invoices') }}\nwhere not deleted\n"
MONEY = textwrap.dedent(
    """\
    {% macro cents_to_dollars(column) -%}
        round({{ column }} / 100.0, 2)
    {%- endmacro %}

    {% macro amount_vat(net_cents) -%}
        round({{ net_cents }} * 0.19 / 100.0, 2)
    {%- endmacro %}
    """
)
HELPER = textwrap.dedent(
    """\
    def totals(invoices, rates, currency="EUR", *, precision=2):
        return {c: round(v * rates[c], precision) for c, v in invoices.items()}


    class Report:
        def write(self, path, payload):
            return path, payload
    """
)


def renamed(before: dict[str, str], after: dict[str, str]) -> list[Rename]:
    paths = sorted(before.keys() | after.keys())
    files = [ChangedFile(p, before.get(p), after.get(p)) for p in paths]
    return find_renames([f for f in files if f.before != f.after])


def test_a_model_file_renamed_with_its_content() -> None:
    old, new = "models/staging/stg_invoices.sql", "models/staging/stg_billing_invoices.sql"
    assert renamed({old: STG}, {new: STG}) == [
        Rename("file", "stg_invoices", "stg_billing_invoices", new, old_path=old)
    ]


def test_a_renamed_file_may_change_a_little_but_not_become_another() -> None:
    old, new = "models/stg_invoices.sql", "models/stg_billing_invoices.sql"
    edited = STG.replace("where not deleted", "where not deleted and amount_cents > 0")
    assert [r.new for r in renamed({old: STG}, {new: edited})] == ["stg_billing_invoices"]
    other = "select 1 as id\n"
    assert renamed({old: STG}, {new: other}) == []  # a file deleted, another added
    assert renamed({old: STG}, {"models/stg_billing_invoices.py": STG}) == []  # not a model


def test_two_equally_good_new_homes_are_no_rename() -> None:
    old = "models/stg_invoices.sql"
    after = {"models/a_invoices.sql": STG, "models/b_invoices.sql": STG}
    assert renamed({old: STG}, after) == []


def test_a_macro_renamed_in_place() -> None:
    after = MONEY.replace("macro cents_to_dollars(", "macro dollars_from_cents(")
    assert renamed({"macros/money.sql": MONEY}, {"macros/money.sql": after}) == [
        Rename("macro", "cents_to_dollars", "dollars_from_cents", "macros/money.sql",
               old_path="macros/money.sql")
    ]  # fmt: skip


def test_a_macro_moved_to_another_file_under_a_new_name() -> None:
    moved = "{% macro to_dollars(column) -%}\n    round({{ column }} / 100.0, 2)\n{%- endmacro %}\n"
    rest = MONEY.split("\n\n", 1)[1]
    found = renamed(
        {"macros/money.sql": MONEY}, {"macros/money.sql": rest, "macros/dollars.sql": moved}
    )
    assert [(r.kind, r.old, r.new, r.path) for r in found] == [
        ("macro", "cents_to_dollars", "to_dollars", "macros/dollars.sql")
    ]


def test_a_macro_kept_as_a_stub_or_with_other_parameters_is_no_rename() -> None:
    stub = (
        MONEY
        + "{% macro to_dollars(column) -%}\n    round({{ column }} / 100.0, 2)\n{%- endmacro %}\n"
    )
    assert renamed({"macros/money.sql": MONEY}, {"macros/money.sql": stub}) == []
    other = MONEY.replace("macro cents_to_dollars(column)", "macro to_dollars(column, scale)")
    assert renamed({"macros/money.sql": MONEY}, {"macros/money.sql": other}) == []


def test_a_parameter_renamed_in_place_function_and_method() -> None:
    after = HELPER.replace("currency=", "reporting_currency=").replace(
        "def write(self, path, payload)", "def write(self, dest, payload)"
    )
    assert renamed({"dags/lib.py": HELPER}, {"dags/lib.py": after}) == [
        Rename("parameter", "path", "dest", "dags/lib.py", owner="Report.write"),
        Rename("parameter", "currency", "reporting_currency", "dags/lib.py", owner="totals"),
    ]


def test_a_keyword_only_parameter_renamed() -> None:
    after = HELPER.replace("precision=2)", "digits=2)").replace("precision)", "digits)")
    assert [(r.old, r.new) for r in renamed({"l.py": HELPER}, {"l.py": after})] == [
        ("precision", "digits")
    ]


def test_parameters_added_removed_or_swapped_are_no_rename() -> None:
    added = HELPER.replace('currency="EUR",', 'currency="EUR", rounding="half",')
    swapped = HELPER.replace("invoices, rates,", "rates, invoices,")
    removed = HELPER.replace('rates, currency="EUR",', "rates,")
    for after in (added, swapped, removed):
        assert renamed({"l.py": HELPER}, {"l.py": after}) == []
    assert renamed({"l.py": HELPER}, {"l.py": "def totals(:\n"}) == []  # does not parse


def test_changed_texts_reads_both_sides_of_a_real_change(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "models").mkdir()
    (repo / "models" / "stg_invoices.sql").write_text(STG)
    (repo / "macros").mkdir()
    (repo / "macros" / "money.sql").write_text(MONEY)
    base = commit_all(repo, "good")
    git(repo, "mv", "models/stg_invoices.sql", "models/stg_billing_invoices.sql")
    money = (repo / "macros" / "money.sql").read_text().replace("cents_to_dollars", "to_usd")
    (repo / "macros" / "money.sql").write_text(money)
    head = commit_all(repo, "rename")
    files = changed_texts(repo, base, head)
    assert sorted((f.path, f.before is None, f.after is None) for f in files) == [
        ("macros/money.sql", False, False),
        ("models/stg_billing_invoices.sql", True, False),
        ("models/stg_invoices.sql", False, True),
    ]
    assert [(r.kind, r.old, r.new) for r in find_renames(files)] == [
        ("file", "stg_invoices", "stg_billing_invoices"),
        ("macro", "cents_to_dollars", "to_usd"),
    ]
