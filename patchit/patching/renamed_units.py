"""The failed unit as a candidate that follows a rename leaves it.

dbt names a generic test after its model and column (`accepted_values_stg_orders_status__
placed__shipped`); a candidate that follows the change's rename of `status` to `order_status`
into the model's YAML turns that test into `accepted_values_stg_orders_order_status__...`,
and the test that failed no longer exists under its old name. Verification must then run
and judge the renamed test, not refuse the candidate because the old one did not run (nor
accept a candidate that merely made a test disappear: the renamed test must run and pass).
"""

from __future__ import annotations

import re

from patchit.events.model import UniversalFailureEvent


def followed_unit(unit_id: str, follows: dict[str, str]) -> str:
    """A dbt test's unique id with each renamed name in its test name replaced (its trailing
    hash dropped: dbt computes a new one); any other unit id as it is."""
    parts = unit_id.split(".")
    if len(parts) < 3 or parts[0] != "test" or not follows:
        return unit_id
    name = parts[2]
    for old, new in follows.items():
        name = re.sub(rf"(?<=_){re.escape(old)}(?=_|$)", new, name, flags=re.IGNORECASE)
    return unit_id if name == parts[2] else ".".join([*parts[:2], name])


def followed_event(event: UniversalFailureEvent, follows: dict[str, str]) -> UniversalFailureEvent:
    """`event` with its unit and related units as the candidate's renames leave them."""
    if not follows:
        return event
    related = [followed_unit(str(u), follows) for u in event.context.get("related_units") or []]
    update: dict[str, object] = {"unit_id": followed_unit(event.unit_id, follows)}
    if related:
        update["context"] = {**event.context, "related_units": related}
    return event.model_copy(update=update)
