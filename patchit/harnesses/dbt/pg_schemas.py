"""The Postgres sandbox schemas of one dbt harness: where each candidate builds (a schema of the
incident's database: patchit's copy of the user's, or the user's own), the role its dbt logs
in as (`patchit.sandbox.pg_role`), and what its `--defer` reads (the schemas of the failing
run's manifest). All of it is dropped when the incident ends, and a killed run's is swept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from patchit.errors import HarnessError
from patchit.sandbox.pg_clone import (
    Clone,
    drop_clone,
    make_clone,
    names_its_database,
    with_dbname,
)
from patchit.sandbox.pg_orphans import sweep, sweep_clones, sweep_roles
from patchit.sandbox.pg_role import (
    CANNOT,
    CANNOT_IN_COPY,
    ROLE_PASSWORD_ENV,
    CannotVerifySafely,
    Restricted,
    admit,
    check_role,
    drop_role,
    grant_database,
    grant_reads,
    grant_statements,
    make_role,
    may_create_roles,
    probe_login,
    role_output,
)
from patchit.sandbox.postgres import SANDBOX_PREFIX, PgWarehouse, dbname_of, sandbox_schema


@dataclass(frozen=True)
class Placed:
    """Where a candidate's run builds: its sandbox `schema`, the profile `output` it connects
    with (the user's, or its database the incident's clone), the names of the relations its
    `--defer` finds built, the incident's database (`clone.name` None: the user's), and in the
    user's database the restricted role `output` logs in as (`patchit.sandbox.pg_role`)."""

    schema: str
    output: dict[str, Any]
    relations: set[str]
    clone: Clone
    role: Restricted | None = None


class PgSchemas:
    """The sandbox schemas (and databases of its own) one harness made; close() drops them
    all. `clone` ("auto" or "never") and `clone_limit` (bytes) say whether an incident gets a
    copy of the user's database (`patchit.sandbox.pg_clone`); without one, candidates log in
    as `role` (the operator's `[sandbox] pg_role`) or a role made for the heal, else nothing
    runs (`patchit.sandbox.pg_role`)."""

    def __init__(self) -> None:
        self.clone = "auto"
        self.clone_limit = 256 * 2**20
        self.role: str | None = None
        self._clones: dict[str, Clone] = {}  # the user's output -> the incident's database
        # the incident database's output -> the role runs log in as
        self._roles: dict[str, Restricted | None] = {}
        self._swept: set[str] = set()  # the user's outputs whose dead runs were swept
        self._made: list[tuple[PgWarehouse, str, Path]] = []  # and the scratch it is for
        self.swept: list[str] = []  # schemas (and clones) of dead runs dropped on the way
        self._problems: list[str] = []  # what close() says besides its own
        self._lock = threading.Lock()

    def sweep_dead(self, output: dict[str, Any]) -> None:
        """Once per database: drop the schemas and clones that killed runs left there
        (`patchit.sandbox.pg_orphans`), on a connection closed afterwards (a session on the
        user's database would keep it from being copied)."""
        key = _key(output)
        if key in self._swept:
            return
        self._swept.add(key)
        warehouse = PgWarehouse(output)
        try:  # a dead run's schemas before its role: they hold what the role built
            done = [*sweep(warehouse), *sweep_clones(output), *sweep_roles(warehouse)]
            self.swept += [v.schema for v, dropped in done if dropped]
            self._problems += [
                f"sandbox {v.schema} of a dead run was not dropped: {v.error}"
                for v, _ in done
                if v.error
            ]
        except HarnessError as exc:  # not the heal's failure: said by close()
            self._problems.append(f"sandboxes of dead runs were not swept: {exc}")
        finally:
            warehouse.close()

    def _database(self, output: dict[str, Any], manifest: Path | None) -> Clone:
        """The incident's database on `output`'s server: a clone made the first time (with
        `clone` "auto"), kept until its last schema is released."""
        key = _key(output)
        with self._lock:  # a baseline and a candidate place at once: one copy for both
            return self._clones.get(key) or self._make(output, key, manifest)

    def _make(self, output: dict[str, Any], key: str, manifest: Path | None) -> Clone:
        self.sweep_dead(output)
        if self.clone == "never":
            clone = Clone(None, '[sandbox] pg_clone = "never"')
        elif named := names_its_database(manifest):
            clone = Clone(None, f"{named} names its database, which dbt-postgres would refuse "
                          "to read across databases from a copy")  # fmt: skip
        else:
            clone = self._reachable(output, make_clone(output, self.clone_limit))
        self._clones[key] = clone
        return clone

    def _reachable(self, output: dict[str, Any], clone: Clone) -> Clone:
        """`clone` once a connection to it works (a pg_hba rule or a pooler may refuse a
        database it does not know), else dropped and the user's database, with why."""
        if clone.name is None:
            return clone
        probe = PgWarehouse(with_dbname(output, clone.name), purpose="patchit's copy")
        try:
            probe.query("select 1")
            return clone
        except HarnessError as exc:
            try:
                drop_clone(output, clone.name)
            except HarnessError as dropped:
                self._problems.append(f"patchit's database {clone.name} was not dropped: "
                                      f"{dropped}")  # fmt: skip
            return Clone(None, f"its copy {clone.name} could not be reached ({exc})",
                         clone.source)  # fmt: skip
        finally:
            probe.close()

    def place(self, output: dict[str, Any], scratch: Path, manifest: Path | None = None) -> Placed:
        """An empty sandbox schema for the candidate whose scratch dir is `scratch`, in the
        incident's database, and the names of the relations in the schemas `--defer` reads
        (`deferred_schemas`): a same-named table in another schema of the database (another
        environment's) is not the user's node built."""
        clone = self._database(output, manifest)
        where = output if clone.name is None else with_dbname(output, clone.name)
        schema = sandbox_schema(scratch)
        with self._lock:  # a connection per schema: a baseline's long copy holds up no other
            known = [w for w, made, _ in self._made if made == schema]
        warehouse = known[0] if known else PgWarehouse(where)
        try:  # the role first: without one, nothing is made and nothing runs
            role = self._restricted(warehouse, clone, manifest)
            warehouse.reset(schema)
        except BaseException:
            if not known:
                warehouse.close()
            raise
        with self._lock:
            if not known:
                self._made.append((warehouse, schema, scratch.resolve()))
        if role is not None:
            admit(warehouse, role.role, [schema])
            check_role(warehouse, role.role, role.made)  # it can write nothing of the user's
            where = role_output(where, role)
        relations = warehouse.relations(deferred_schemas(output, manifest))
        return Placed(schema, where, relations, clone, role)

    def _restricted(
        self, warehouse: PgWarehouse, clone: Clone, manifest: Path | None
    ) -> Restricted | None:
        """The role candidates log in as in the incident's database: the operator's
        `pg_role`, or one made for the heal (once per database, its reads granted at each
        placing: a baseline may read what a candidate does not). Without either,
        CannotVerifySafely, in a copy too: the profile's user reaches the server from there."""
        output = warehouse.output
        key = _key(output)
        with self._lock:
            if key not in self._roles:
                self._roles[key] = self._role_for(warehouse, clone, manifest)
            role = self._roles[key]
        if role is not None and role.made:
            self._problems += grant_reads(warehouse, role.role, read_schemas(warehouse, manifest))
        return role

    def _role_for(
        self, warehouse: PgWarehouse, clone: Clone, manifest: Path | None
    ) -> Restricted | None:
        output = warehouse.output
        if self.role:
            role = Restricted(self.role, os.environ.get(ROLE_PASSWORD_ENV), made=False)
            if clone.name is not None:  # a copy admits no role but its owner's
                grant_database(warehouse, role.role)
        elif may_create_roles(warehouse):
            role = make_role(warehouse)
        elif clone.name is not None:  # the copy is no boundary for the user's own role
            source, user = clone.source, output.get("user") or "the profile's user"
            raise CannotVerifySafely(
                f"{CANNOT_IN_COPY}: no [sandbox] pg_role, and {user} may not create roles, so "
                f"a candidate's SQL (hooks included) would run in patchit's copy of database "
                f"{source} as {user}, who can still reach beyond it (alter database "
                f"{source}, the roles it may `set role` to, COPY ... TO PROGRAM where it holds "
                "pg_execute_server_program); to verify here: "
                + grant_statements(output, read_schemas(warehouse, manifest))
            )
        else:
            db, user = dbname_of(output), output.get("user") or "the profile's user"
            why = f" ({clone.why})" if clone.why else ""
            raise CannotVerifySafely(
                f"{CANNOT}: no copy of database {db}{why}, no [sandbox] pg_role, and {user} may "
                "not create roles, so a candidate's SQL (hooks included) would run as the "
                "profile's user, who can write production; to verify here: "
                + grant_statements(output, read_schemas(warehouse, manifest))
            )
        try:
            probe_login(output, role)
        except CannotVerifySafely:
            if role.made:
                with contextlib.suppress(HarnessError):
                    drop_role(warehouse, role.role)
            raise
        return role

    def warehouse_of(self, schema: str) -> PgWarehouse:
        """The connection sandbox schema `schema` was made on (by `place`)."""
        return next(warehouse for warehouse, made, _ in self._made if made == schema)

    def release(self, area: Path | None = None) -> list[str]:
        """Drop the schemas made for scratch dirs under `area` (all: None), and the databases
        and connections no schema is left in (the incident is over: the next one gets a
        fresh copy); returns a line per schema or database that could not be dropped."""
        with self._lock:
            return self._release(area)

    def _release(self, area: Path | None) -> list[str]:
        self._made, problems = drop_made(self._made, area)
        for key, role in list(self._roles.items()):
            if any(_key(w.output) == key for w, _, _ in self._made):
                continue
            del self._roles[key]
            if role is None or not role.made:
                continue
            owner = PgWarehouse(json.loads(key))
            try:
                drop_role(owner, role.role)
            except HarnessError as exc:
                problems.append(f"patchit's role {role.role} was not dropped: {exc}")
            finally:
                owner.close()
        for key, clone in list(self._clones.items()):
            used = clone.name is not None and any(
                dbname_of(w.output) == clone.name for w, _, _ in self._made
            )
            if used:
                continue
            del self._clones[key]
            if clone.name is None:
                continue
            try:
                drop_clone(json.loads(key), clone.name)
            except HarnessError as exc:
                problems.append(f"patchit's database {clone.name} was not dropped: {exc}")
        return problems

    def close(self) -> list[str]:
        """Drop every schema and database made; returns a line per one that could not be
        dropped (and per database whose dead runs' sandboxes could not be swept)."""
        problems = [*self._problems, *self.release()]
        self._problems = []
        return problems


def _key(output: dict[str, Any]) -> str:
    return json.dumps(output, sort_keys=True, default=str)


def deferred_schemas(output: dict[str, Any], manifest: Path | None) -> list[str]:
    """The schemas where the user's nodes live, which `--defer` reads: the target's schema
    and every schema the failing run's manifest places a model, seed or snapshot of the
    target's database in (dbt's `<schema>_<custom>` ones, a custom `generate_schema_name`'s)."""
    found = {str(output.get("schema") or "public")}
    if manifest is not None:
        dbname = dbname_of(output)
        found |= {
            schema
            for database, schema, _ in manifest_relations(manifest).values()
            if not dbname or (database or dbname) == dbname
        }
    return sorted(found)


def read_schemas(warehouse: PgWarehouse, manifest: Path | None) -> list[str]:
    """The schemas of the user's database a sandbox build reads: where the failing run's
    manifest places its models, seeds, snapshots and sources, and the target's; without a
    manifest, every schema (the whole upstream is built from the sources)."""
    output = warehouse.output
    if manifest is None:
        rows = warehouse.query(
            "select nspname from pg_namespace where nspname not like 'pg\\_%%' and nspname <> "
            "'information_schema' and nspname not like %s",
            (SANDBOX_PREFIX.replace("_", "\\_") + "%",),
        )
        return sorted(str(r[0]) for r in rows)
    found = set(deferred_schemas(output, manifest))
    dbname = dbname_of(output)
    try:
        sources = json.loads(manifest.read_bytes()).get("sources") or {}
    except (OSError, ValueError, AttributeError):
        sources = {}
    for source in sources.values() if isinstance(sources, dict) else ():
        if not isinstance(source, dict) or not source.get("schema"):
            continue
        if not dbname or str(source.get("database") or dbname) == dbname:
            found.add(str(source["schema"]))
    return sorted(s for s in found if not s.startswith(SANDBOX_PREFIX))


Relation = tuple[str, str, str]  # database ("" when the manifest has none), schema, name
_RELATIONS: OrderedDict[bytes, dict[str, Relation]] = OrderedDict()
_RELATIONS_LOCK = threading.Lock()
_DIGESTS: dict[tuple[str, int, int, int], bytes] = {}  # a file's version -> its content's key


def manifest_relations(manifest: Path) -> dict[str, Relation]:
    """Where the manifest's models, seeds and snapshots are built, by unique_id; parsed once
    per content (every candidate of a heal asks, each of its own copy of the manifest), and
    a file not read again while it is unchanged."""
    try:
        stat = manifest.stat()
        version = (str(manifest), stat.st_ino, stat.st_mtime_ns, stat.st_size)
        with _RELATIONS_LOCK:  # a file read before, unchanged: not read again
            key = _DIGESTS.get(version)
            if key is not None and key in _RELATIONS:
                _RELATIONS.move_to_end(key)
                return _RELATIONS[key]
        data = manifest.read_bytes()
    except OSError:
        return {}
    key = hashlib.blake2b(data, digest_size=16).digest()
    with _RELATIONS_LOCK:
        _DIGESTS[version] = key
        while len(_DIGESTS) > 64:
            _DIGESTS.pop(next(iter(_DIGESTS)))
        if key in _RELATIONS:
            _RELATIONS.move_to_end(key)
            return _RELATIONS[key]
    try:
        nodes = json.loads(data).get("nodes") or {}
    except (ValueError, AttributeError):
        nodes = {}
    found = {
        str(uid): (
            str(node.get("database") or ""),
            str(node["schema"]),
            str(node.get("alias") or node.get("name") or ""),
        )
        for uid, node in (nodes.items() if isinstance(nodes, dict) else ())
        if isinstance(node, dict)
        and node.get("resource_type") in ("model", "seed", "snapshot")
        and node.get("schema")
    }
    with _RELATIONS_LOCK:
        _RELATIONS[key] = found
        while len(_RELATIONS) > 8:
            _RELATIONS.popitem(last=False)
    return found


W = TypeVar("W", bound="Droppable")


class Droppable(Protocol):
    def drop(self, schema: str, if_comment: str | None = None) -> bool: ...
    def close(self) -> None: ...


def drop_made(
    made: list[tuple[W, str, Path]], area: Path | None
) -> tuple[list[tuple[W, str, Path]], list[str]]:
    """Drop the sandbox schemas of `made` (warehouse, schema, scratch dir) whose scratch is
    under `area` (all: None), closing their connections: (the ones kept, a line per schema
    that could not be dropped). Postgres's and Snowflake's schema sandboxes share it."""
    problems: list[str] = []
    kept: list[tuple[W, str, Path]] = []
    for warehouse, schema, scratch in made:
        if area is not None and not scratch.is_relative_to(area.resolve()):
            kept.append((warehouse, schema, scratch))
            continue
        try:
            warehouse.drop(schema)
        except HarnessError as exc:
            problems.append(f"sandbox schema {schema} was not dropped: {exc}")
        finally:
            with contextlib.suppress(Exception):
                warehouse.close()
    return kept, problems
