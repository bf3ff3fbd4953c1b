"""A conversion error's column and offending values: from the changed data files and from a
read-only DuckDB copy (made here with the duckdb library; no dbt)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.conversion import conversion_value, find_conversion
from patchit.evidence.model import Evidence, Relation

CSV_DIFF = """\
diff --git a/seeds/raw_invoices.csv b/seeds/raw_invoices.csv
index 1..2 100644
--- a/seeds/raw_invoices.csv
+++ b/seeds/raw_invoices.csv
@@ -1,3 +1,4 @@
 invoice_id,net_cents,tax_cents
-9001,9900,1881
+9001,9900,n/a
+9003,100,unknown
 9002,2900,580
"""


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Conversion Error: Could not convert string 'n/a' to INT32", ("n/a", "INTEGER")),
        ('Error when converting column "tax_cents". Could not convert string "n/a" to '
         "'INTEGER'", ("n/a", "INTEGER")),
        ('Conversion Error: invalid date field format: "04/02/2025", expected format is '
         "(YYYY-MM-DD)", ("04/02/2025", "DATE")),
        ("invalid literal for int() with base 10: 'n/a'", ("n/a", "INTEGER")),
        ("could not convert string to float: '0,085'", ("0,085", "DOUBLE")),
        ("time data '04/02/2025' does not match format '%Y-%m-%d'", ("04/02/2025", "DATE")),
        ('Binder Error: Referenced column "amout" not found', None),
    ],
)  # fmt: skip
def test_the_value_and_type_a_conversion_error_names(
    message: str, expected: tuple[str, str] | None
) -> None:
    assert conversion_value(message) == expected


def _evidence(tmp_path: Path, message: str, **update: object) -> Evidence:
    event = UniversalFailureEvent(
        source=FailureSource.DBT,
        pipeline_id="billing",
        unit_id="model.billing.stg_invoices",
        error_message=message,
    )
    return Evidence.model_validate(
        {"event": event, "repo_root": str(tmp_path), "error": message, **update}
    )


def _seed(tmp_path: Path) -> None:
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "raw_invoices.csv").write_text(
        "invoice_id,net_cents,tax_cents\n9001,9900,n/a\n9003,100,unknown\n9002,2900,580\n"
    )


def test_a_changed_csv_names_the_column_holding_the_value(tmp_path: Path) -> None:
    _seed(tmp_path)
    evidence = _evidence(tmp_path, "Could not convert string 'n/a' to INT32",
                         breaking_diff=CSV_DIFF)  # fmt: skip
    found = find_conversion(evidence, tmp_path, None)
    assert found is not None
    assert (found.column, found.relation, found.target_type) == (
        "tax_cents", "seeds/raw_invoices.csv", "INTEGER")  # fmt: skip
    assert found.samples == ["n/a", "unknown"] and found.changed


def _warehouse(tmp_path: Path) -> Path:
    db = tmp_path / "billing.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("create table raw_invoices (invoice_id integer, net_cents integer, "
                    "tax_cents varchar)")  # fmt: skip
        con.execute("insert into raw_invoices values (9001, 9900, 'n/a'), (9002, 2900, '580'),"
                    " (9003, 100, '')")  # fmt: skip
        # a view that casts the very value cannot be read: it must be skipped, not fatal
        con.execute("create view broken as select cast(tax_cents as integer) as tax_cents "
                    "from raw_invoices")  # fmt: skip
    return db


def test_the_warehouse_copy_names_the_column_its_type_and_offending_values(
    tmp_path: Path,
) -> None:
    db = _warehouse(tmp_path)
    upstream = [
        Relation(name="broken", relation="billing.main.broken", columns=["tax_cents"]),
        Relation(name="raw_invoices", relation="billing.main.raw_invoices",
                 columns=["invoice_id", "net_cents", "tax_cents"]),
    ]  # fmt: skip
    evidence = _evidence(tmp_path, "Conversion Error: Could not convert string 'n/a' to INT32",
                         upstream=upstream)  # fmt: skip
    found = find_conversion(evidence, tmp_path, db)
    assert found is not None
    assert (found.column, found.relation, found.column_type) == (
        "tax_cents", "billing.main.raw_invoices", "VARCHAR")  # fmt: skip
    assert found.samples == ["", "n/a"]  # every value that does not cast, sorted
    assert not found.changed
    with duckdb.connect(str(db), read_only=True) as con:  # read-only: the copy is unchanged
        assert con.execute("select count(*) from raw_invoices").fetchone() == (3,)


def test_both_say_it_the_warehouse_type_and_the_file_the_change_edited(tmp_path: Path) -> None:
    _seed(tmp_path)
    db = _warehouse(tmp_path)
    upstream = [Relation(name="raw_invoices", relation="billing.main.raw_invoices",
                         columns=["tax_cents"])]  # fmt: skip
    evidence = _evidence(tmp_path, "Could not convert string 'n/a' to INT32", upstream=upstream,
                         breaking_diff=CSV_DIFF)  # fmt: skip
    found = find_conversion(evidence, tmp_path, db)
    assert found is not None and found.changed and found.column_type == "VARCHAR"
    assert found.relation == "billing.main.raw_invoices (from seeds/raw_invoices.csv)"


def test_no_finding_for_other_errors_or_values_nobody_holds(tmp_path: Path) -> None:
    _seed(tmp_path)
    other = _evidence(tmp_path, 'Referenced column "amout" not found', breaking_diff=CSV_DIFF)
    assert find_conversion(other, tmp_path, None) is None
    elsewhere = _evidence(tmp_path, "Could not convert string 'zzz' to INT32",
                          breaking_diff=CSV_DIFF)  # fmt: skip
    assert find_conversion(elsewhere, tmp_path, None) is None
