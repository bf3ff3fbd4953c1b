"""What the corpus's dbt scenarios need of a shared warehouse (`patchit bench --warehouse
postgres|snowflake`), whatever the warehouse: a schema per checkout, the profile retargeted at
it, and "the user's data untouched" judged on content.

The base project is copied once with its profile retargeted: the same profile and target
names, the warehouse's connection, and `schema: "{{ env_var('<SCHEMA_ENV>') }}"`. Every
checkout of a scenario (the good run, the reference, the user's, each branch checked) is run
with its own schema, named after its path, so they never see each other's relations, as their
DuckDB files did not.

"The user's data untouched" is judged on the content of the checkout's schemas (relations,
columns, sorted rows), read by patchit's bench, never by the runs being judged. The hidden
check's SQL is written for DuckDB: a trailing `order by all` is dropped and the rows are sorted
here. A warehouse supplies its connection (`_output`, `_execute`, `_read`, `_relations`,
`_schema_names`); this class does the rest.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import yaml

_ORDER_BY_ALL = re.compile(r"\s+order\s+by\s+all\s*;?\s*$", re.IGNORECASE)


def plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return round(value, 6)
    try:  # numeric comes back as Decimal: compare it as DuckDB's doubles would print
        return round(float(value), 6) if hasattr(value, "as_tuple") else str(value)
    except (TypeError, ValueError):
        return str(value)


class SchemaBench(ABC):
    """A schema per checkout on one throw-away server, for the whole corpus run."""

    SCHEMA_ENV: ClassVar[str] = "BENCH_SCHEMA"
    name: ClassVar[str] = "a warehouse"
    # `$PATCHIT_HOME/patchit.toml` of every patchit run (the operator's settings it needs)
    operator_settings: ClassVar[str] = ""

    def schema_of(self, checkout: Path) -> str:
        digest = hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()
        return self._fold(f"bench_{digest[:12]}")

    def env(self, checkout: Path) -> dict[str, str]:
        return {self.SCHEMA_ENV: self.schema_of(checkout)}

    def retarget(self, project: Path, dest: Path) -> Path:
        """A copy of the base project whose profile's target is this warehouse."""
        shutil.copytree(project, dest, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
        profiles_file = dest / "profiles.yml"
        profiles = yaml.safe_load(profiles_file.read_text(encoding="utf-8"))
        schema = "{{ env_var('" + self.SCHEMA_ENV + "') }}"
        for profile in profiles.values():
            target = profile["target"]
            threads = profile["outputs"][target].get("threads", 1)
            profile["outputs"][target] = {**self._output(schema), "threads": threads}
        profiles_file.write_text(yaml.safe_dump(profiles, sort_keys=False), encoding="utf-8")
        return dest

    def schemas(self, checkout: Path) -> list[str]:
        """The checkout's schema and dbt's `<schema>_<custom>` ones, as they exist."""
        schema = self.schema_of(checkout)
        return sorted(s for s in self._schema_names() if s == schema or s.startswith(f"{schema}_"))

    def drop(self, checkout: Path) -> None:
        """Drop what earlier runs of the checkout built (a run from scratch starts empty)."""
        for name in self.schemas(checkout):
            self._execute(f"drop schema {self._quote(name)} cascade")

    def content_hash(self, checkout: Path) -> str:
        """A hash of what the checkout's schemas hold (relations, columns, sorted rows)."""
        schemas = self.schemas(checkout)
        if not schemas:
            return "absent"
        digest = hashlib.sha256()
        for schema, name, kind in self._relations(schemas):
            # the schema's name differs per checkout; what it holds is compared
            digest.update(f"{name}:{kind}\n".encode())
            try:
                columns, rows = self._read(schema, f"select * from {self._quote(schema)}."
                                                   f"{self._quote(name)}")  # fmt: skip
            except QueryError as exc:  # a view the broken commit left that cannot be read
                digest.update(f"unreadable: {exc}\n".encode())
                continue
            digest.update(f"{columns}\n".encode())
            for row in sorted(repr([plain(v) for v in r]) for r in rows):
                digest.update(row.encode())
        return digest.hexdigest()

    def query(self, checkout: Path, sql: str) -> list[list[Any]] | str | None:
        """The hidden check's rows in the checkout's schema (sorted); None when the checkout
        built nothing; an error as a string."""
        if not self.schemas(checkout):
            return None
        try:
            _columns, rows = self._read(self.schema_of(checkout), _ORDER_BY_ALL.sub("", sql))
        except QueryError as exc:
            return f"error: {exc}"
        return sorted(([plain(v) for v in row] for row in rows), key=repr)

    # -- what a warehouse supplies -------------------------------------------------------

    @abstractmethod
    def _output(self, schema: str) -> dict[str, Any]:
        """The dbt profile output (less `threads`) reaching this server with `schema`."""

    @abstractmethod
    def _schema_names(self) -> list[str]: ...

    @abstractmethod
    def _relations(self, schemas: list[str]) -> list[tuple[str, str, str]]:
        """(schema, name, kind) of every table and view of `schemas`, sorted."""

    @abstractmethod
    def _execute(self, sql: str) -> None: ...

    @abstractmethod
    def _read(self, schema: str, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Columns and rows of `sql` run with `schema` first on the search path; QueryError
        when the warehouse rejects it."""

    def _fold(self, name: str) -> str:
        """A name as the warehouse stores it unquoted."""
        return name

    @staticmethod
    def _quote(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'


class QueryError(Exception):
    """The warehouse rejected a hidden check's SQL (its message)."""
