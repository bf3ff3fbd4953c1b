"""The screen's one line in the loop's output says a reason once for all the files it kept
from being judged (a macro rename across 27 models printed 27 copies of one reason)."""

from __future__ import annotations

from patchit.screen.model import Screening


def test_a_reason_shared_by_many_files_is_said_once() -> None:
    why = "calls to_dollars(), which the screen does not render"
    skipped = [f"models/stg_{n}.sql: {why}" for n in range(27)]
    skipped.insert(3, "models/stg_payroll.sql: uses Jinja beyond ref/source/config (dbt.x())")
    line = Screening(check="EXPLAIN", skipped=skipped).summary()
    assert line == (
        "screen passed (EXPLAIN: nothing); not judged: models/stg_0.sql, models/stg_1.sql and "
        f"25 more: {why}; models/stg_payroll.sql: uses Jinja beyond ref/source/config (dbt.x())"
    )
    # the report keeps every file
    assert len(Screening(check="EXPLAIN", skipped=skipped).skipped) == 28


def test_few_files_or_no_file_are_said_as_they_were() -> None:
    three = Screening(check="c", skipped=["a.sql: x", "b.sql: x", "c.sql: x"]).summary()
    assert three.endswith("not judged: a.sql, b.sql, c.sql: x")
    assert Screening.nothing("no manifest yet").summary().endswith("not judged: no manifest yet")
