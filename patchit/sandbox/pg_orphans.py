"""Sandbox schemas that a killed heal left in the user's Postgres database, and their sweep.

Every `patchit_<12 hex>` schema patchit makes carries a comment naming its owner, the process
that made it (`patchit.state.liveness.placed_owner`: `host:pid:start:<boot id>/<pid namespace>`),
and when, by the server's clock:

    patchit sandbox: dropped when the heal ends; safe to drop;
    owner=ci-7:4242:81234:1b2f...-9c/4026531836; created=2026-11-26T23:10:00Z

A heal drops its schemas when it ends; one killed with `kill -9` cannot. The sweep (at the
start of every Postgres sandbox, and `patchit sandbox clean`) drops a schema only when:
- its comment is patchit's and names an owner, and
- that owner ran here (same host name, boot id and pid namespace as the sweeper: its pid
  means the same process) and is dead (its pid is free, or reused by a later process), or
  it ran elsewhere (another host, boot or pid namespace: a container beside this one with the
  same host name is alive for all its pid says here), or names no boot id and pid namespace
  (an older patchit's), and the schema is older than the age limit (24 h by default).
Anything else is kept: a schema without patchit's comment (even named `patchit_...`), an older
patchit's comment with no owner, a live run's, a recent one of another host, and one that
objects outside it depend on (a user's view reading a sandbox table, a user's foreign key to
one: `drop schema ... cascade` would drop them too), said in one line. The check and the
drop happen under the schema's advisory lock, so a run that re-makes the schema meanwhile
keeps it. Only schemas that the sweeping role owns (or is a member of the owner of) are
judged, and a schema that cannot be dropped is said and the sweep goes on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from patchit.errors import HarnessError
from patchit.sandbox.pg_clone import CLONE_PREFIX, clones, drop_clone
from patchit.sandbox.pg_role import ROLE_PREFIX, drop_role, roles
from patchit.sandbox.postgres import COMMENT_HEAD, PgWarehouse, SchemaInUse
from patchit.sandbox.postgres import owner_comment as owner_comment  # re-exported
from patchit.state.liveness import owner_here, placed_owner_is_dead

MAX_AGE_S = 24 * 3600.0
_OWNED = re.compile(r"; owner=(?P<owner>[^;\s]+); created=(?P<created>\d{4}-\d\d-\d\dT[\d:]+Z)$")


def parse_comment(comment: str | None) -> tuple[str, float] | None:
    """(owner, created as epoch seconds) of a patchit comment that names them, else None."""
    if not comment or not comment.startswith(COMMENT_HEAD):
        return None
    found = _OWNED.search(comment)
    if found is None:
        return None
    created = datetime.strptime(found["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return found["owner"], created.timestamp()


@dataclass(frozen=True)
class Verdict:
    """What the sweep made of one `patchit_<hex>` schema."""

    schema: str
    drop: bool
    why: str
    comment: str | None = None
    error: str | None = None  # the drop failed (the sweep went on)

    def line(self, dropped: bool | None = None) -> str:
        if not self.drop:
            return f"kept {self.schema}: {self.why}"
        if dropped is False:
            return f"kept {self.schema}: re-made by a live run, or dropped, meanwhile"
        return f"dropped {self.schema}: {self.why}"

    def failure_line(self) -> str:
        """The schema whose drop failed, and why (with an `error`)."""
        kind = "database" if self.schema.startswith(CLONE_PREFIX) else "sandbox schema"
        kind = "role" if self.schema.startswith(ROLE_PREFIX) else kind
        return f"{kind} {self.schema} was not dropped: {self.error}"

    def remedy_line(self) -> str:
        """What to do about a schema whose drop failed."""
        if self.schema.startswith(CLONE_PREFIX):
            return (f"to drop {self.schema}, run `patchit sandbox clean` as its owner (or a "
                    f"superuser), or `drop database {self.schema} with (force)`")  # fmt: skip
        if self.schema.startswith(ROLE_PREFIX):
            return (f"to drop {self.schema}, run `drop owned by {self.schema}` in each database "
                    f"it was used in, then `drop role {self.schema}`")  # fmt: skip
        return (
            f"to drop {self.schema}, run `patchit sandbox clean` with a target whose user owns "
            f"it (or a superuser), or `drop schema {self.schema} cascade` as its owner"
        )


def judge(schema: str, comment: str | None, now: float, max_age_s: float = MAX_AGE_S) -> Verdict:
    """Whether `schema` (with `comment`, at server time `now`) is a dead run's, to drop."""
    if not comment or not comment.startswith(COMMENT_HEAD):
        return Verdict(schema, False, "no patchit comment (not patchit's)", comment)
    owned = parse_comment(comment)
    if owned is None:
        return Verdict(schema, False, "no owner in its comment (an older patchit's): drop it by "
                       "hand if no heal is running", comment)  # fmt: skip
    owner, created = owned
    age_h = max(0.0, now - created) / 3600
    if owner_here(owner):
        if placed_owner_is_dead(owner):
            return Verdict(schema, True, f"its run {owner} is dead", comment)
        return Verdict(schema, False, f"its run {owner} is alive", comment)
    # another host, boot or pid namespace (its pid says nothing here), or an older patchit's
    # owner without its place: the age alone decides
    where = (
        "of another host or pid namespace"
        if owner.count(":") == 3
        else "(no boot id/pid namespace)"
    )
    if now - created > max_age_s:
        return Verdict(schema, True, f"run {owner} {where}, {age_h:.1f} h old", comment)
    return Verdict(
        schema, False, f"run {owner} {where}, {age_h:.1f} h old (under "
        f"{max_age_s / 3600:g} h)", comment,
    )  # fmt: skip


def sweep(
    warehouse: PgWarehouse, max_age_s: float = MAX_AGE_S, dry_run: bool = False
) -> list[tuple[Verdict, bool]]:
    """Judge every sandbox schema of `warehouse`'s database and drop the dead runs' (not with
    `dry_run`); each verdict with whether its schema was dropped. Only the schemas of the
    connection's role (or a role it is a member of) are judged; one that cannot be dropped is
    kept with its `error`, and the rest are swept. HarnessError when the database cannot be
    read."""

    def drop(schema: str, comment: str) -> bool:
        return warehouse.drop(schema, if_comment=comment)

    return _sweep(warehouse.sandboxes(), max_age_s, dry_run, drop, warehouse.in_use)


def sweep_clones(
    output: dict[str, Any], max_age_s: float = MAX_AGE_S, dry_run: bool = False
) -> list[tuple[Verdict, bool]]:
    """Judge every `patchit_db_<12 hex>` database (`patchit.sandbox.pg_clone`) of `output`'s
    server as `sweep` judges schemas, and drop the dead runs' (not with `dry_run`; never
    cutting a session still on one). [] when the server has no maintenance database to list
    them from (nothing to judge)."""
    try:
        found = clones(output)
    except HarnessError:
        return []

    def drop(name: str, comment: str) -> bool:
        return drop_clone(output, name, if_comment=comment, force=False)

    return _sweep(found, max_age_s, dry_run, drop, None)


def sweep_roles(
    warehouse: PgWarehouse, max_age_s: float = MAX_AGE_S, dry_run: bool = False
) -> list[tuple[Verdict, bool]]:
    """Judge every `patchit_r_<12 hex>` role (`patchit.sandbox.pg_role`) the connection's user
    is a member of as `sweep` judges schemas, and drop the dead runs' with what they own and
    were granted in this database (not with `dry_run`)."""

    def drop(role: str, comment: str) -> bool:
        return drop_role(warehouse, role, if_comment=comment)

    return _sweep(roles(warehouse), max_age_s, dry_run, drop, None)


def _sweep(
    found: list[tuple[str, str | None, float]],
    max_age_s: float,
    dry_run: bool,
    drop: Callable[[str, str], bool],
    in_use: Callable[[str], str | None] | None,
) -> list[tuple[Verdict, bool]]:
    """Each of `found` (name, comment, server time) judged, and dropped with `drop` when it is
    a dead run's (`in_use` says, for `dry_run`, why a drop would keep it)."""
    done: list[tuple[Verdict, bool]] = []
    for name, comment, now in found:
        verdict = judge(name, comment, now, max_age_s)
        dropped = False
        try:
            if verdict.drop and dry_run:
                if in_use is not None and (why := in_use(name)):
                    verdict = replace(verdict, drop=False, why=f"{verdict.why}, but {why}")
            elif verdict.drop:
                dropped = drop(name, comment or "")
        except SchemaInUse as exc:
            verdict = replace(verdict, drop=False, why=f"{verdict.why}, but {exc.why}")
        except HarnessError as exc:  # this one's ("must be owner"): the next ones are swept
            error = str(exc)
            verdict = replace(verdict, drop=False, why=f"{verdict.why}, but not dropped: {error}",
                              error=error)  # fmt: skip
        done.append((verdict, dropped))
    return done
