"""The forward fix-its' readers under hypothesis: Jinja-SQL and YAML built from the pieces
they look for, and arbitrary text. Each may find nothing; none may raise or hang.
`make fuzz` runs them with `PATCHIT_FUZZ_EXAMPLES` inputs each."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from patchit.patching.fixits.ambiguous import qualify
from patchit.patching.fixits.column_renames import column_renames
from patchit.patching.fixits.group_by import add_to_group_by
from patchit.patching.fixits.missing_comma import add_comma
from patchit.patching.fixits.rename_sites import Refusal, follow_in_sql
from patchit.patching.fixits.rename_yaml import follow_in_yaml
from patchit.patching.renamed_units import followed_unit
from patchit.policy.renames import is_rename_site
from tests.fuzzing import fuzz_settings, hang_guard

pytestmark = pytest.mark.fuzz

PIECES = [
    "select ", "from ", "where ", "group by ", "join ", "using (status)", " on ", " as ", ", ",
    "\n", "status", "o.status", "order_status", "*", "o.*", "(", ")", "count(*)", "'x'", '"status"',
    "{{ ref('stg_orders') }}", "{{ m('status') }}", "{% if x %}", "{% endif %}", "-- c\n",
    "with t as (", "union all ", " o", " t", "1", "exclude (status)", "order by ", ";",
]  # fmt: skip
YAML_PIECES = [
    "models:\n", "  - name: stg_orders\n", "    columns:\n", "      - name: status\n",
    "        data_tests: [unique]\n", "to: ref('stg_orders')\n", "field: status\n", "  ", "- ",
    "'status'", ": ", "\n", "version: 2\n", "{", "}", "[", "]", "&a ", "*a",
]  # fmt: skip
sql = st.one_of(st.lists(st.sampled_from(PIECES), max_size=40).map("".join), st.text(max_size=300))
yaml = st.one_of(st.lists(st.sampled_from(YAML_PIECES), max_size=30).map("".join), st.text())
lines = st.frozensets(st.integers(min_value=0, max_value=30), max_size=8)


def _columns(name: str) -> set[str] | None:
    return {"order_id", "status"} if name == "stg_orders" else None


@fuzz_settings(40)
@given(before=sql, after=sql)
def test_sql_readers_never_raise(before: str, after: str) -> None:
    with hang_guard():
        renames = column_renames(before, after)
        assert renames is None or isinstance(renames, dict)
        followed = follow_in_sql(after, "stg_orders", {"status": "order_status"}, _columns)
        assert isinstance(followed, str | Refusal)
        qualify(before, after, "status", "'o.status' or 't.status'")
        add_to_group_by(after, "status", frozenset(range(1, 40)))
        add_comma(after, "status", frozenset(range(1, 40)))
        is_rename_site(before, after, {"status": "order_status"})


@fuzz_settings(40)
@given(text=yaml, unit=st.text(max_size=80))
def test_yaml_and_unit_readers_never_raise(text: str, unit: str) -> None:
    with hang_guard():
        result = follow_in_yaml(text, "stg_orders", {"status": "order_status"})
        assert isinstance(result, str | Refusal)
        assert isinstance(followed_unit(unit, {"status": "order_status"}), str)
