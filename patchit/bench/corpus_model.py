"""The benchmark corpus on disk: one TOML file per scenario, two base projects beside them.

A scenario is a realistic breaking commit on top of a good base project, written as
search/replace edits so it stays small and readable, plus what patchit should conclude
(`expect`), the environment the broken commit runs in, and a hidden check: the output
values (a SQL query over the project's DuckDB file, or a file the DAG writes) that the
good commit produced and a fixed branch must reproduce.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from patchit.bench.corpus_keeps import Keep
from patchit.errors import BadInputError

Kind = Literal["dbt", "airflow_callback", "airflow_scan"]
Expect = Literal["fixed", "escalated", "refused"]
Warehouse = Literal["duckdb", "postgres", "snowflake"]
WAREHOUSES: tuple[Warehouse, ...] = ("duckdb", "postgres", "snowflake")
FailureClassName = Literal[
    "code_bug", "env_mismatch", "dependency_issue", "infra_issue", "data_issue", "unknown"
]
AIRFLOW_KINDS = ("airflow_callback", "airflow_scan")


class Edit(BaseModel):
    """One change of the breaking commit: search/replace in a file, a new file, a delete or
    a rename (of the file, keeping its content)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    search: str | None = None
    replace: str = ""
    content: str | None = None
    delete: bool = False
    rename_to: str | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Edit:
        actions = [self.search is not None, self.content is not None, self.delete]
        actions.append(self.rename_to is not None)
        if sum(actions) != 1:
            raise ValueError(f"edit of {self.path}: give exactly one of search, content, "
                             "delete, rename_to")  # fmt: skip
        return self


class HiddenCheck(BaseModel):
    """What the good commit produced: a query over the DuckDB file, or a file's content."""

    model_config = ConfigDict(extra="forbid")

    sql: str | None = None
    file: str | None = None

    @model_validator(mode="after")
    def _one(self) -> HiddenCheck:
        if (self.sql is None) == (self.file is None):
            raise ValueError("check: give exactly one of sql, file")
        return self


class Scenario(BaseModel):
    """One benchmark scenario (a TOML file under the corpus directory)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: Kind
    project: str
    mode: str = Field(description="the failure mode, as in FAILURE_MODES.md")
    source: str = ""
    description: str
    commit_message: str
    expect: Expect
    expect_class: FailureClassName
    trap: bool = False
    dag_id: str | None = None
    logical_date: str = "2026-01-15"
    env: dict[str, str] = Field(default_factory=dict, description="for every run")
    broken_env: dict[str, str] = Field(
        default_factory=dict, description='for the broken runs only; "" unsets the variable'
    )
    hold_db_lock: bool = False
    warehouses: list[Warehouse] = Field(
        default_factory=lambda: list(WAREHOUSES),
        description="where a dbt scenario makes sense (`bench --warehouse postgres|snowflake`)",
    )
    edits: list[Edit]
    check: HiddenCheck
    keeps: list[Keep] = Field(
        default_factory=list,
        description="what a fixed branch must keep of the change (its intent); see corpus_keeps",
    )
    path: Path | None = None
    # the base project as this scenario has it (`corpus_base`)
    duckdb_path: str | None = Field(
        default=None, description="the profile's DuckDB `path:` instead of the base project's"
    )
    crlf: list[str] = Field(
        default_factory=list,
        description="base files written with CRLF line ends; a fixed branch must keep them",
    )
    operator: str = Field(
        default="",
        description="the operator's `$PATCHIT_HOME/patchit.toml` for the scenario's patchit "
        'runs (TOML), e.g. `[policy] revert = "allow"` on two lines',
    )
    fresh_checkout: bool = Field(
        default=False, description="no earlier build: the broken commit's run is the first"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        airflow = self.kind in AIRFLOW_KINDS
        if airflow and not self.dag_id:
            raise ValueError(f"{self.name}: an Airflow scenario needs dag_id")
        if airflow and self.check.file is None:
            raise ValueError(f"{self.name}: an Airflow scenario's check is a file")
        if not airflow and self.check.sql is None:
            raise ValueError(f"{self.name}: a dbt scenario's check is a sql query")
        if self.expect == "fixed" and self.expect_class != "code_bug":
            raise ValueError(f"{self.name}: only a code_bug can be expected fixed")
        if not self.edits:
            raise ValueError(f"{self.name}: a scenario needs a breaking change (edits)")
        return self

    @model_validator(mode="after")
    def _keeps_fit(self) -> Scenario:
        if self.kind in AIRFLOW_KINDS and any(k.sql is not None for k in self.keeps):
            raise ValueError(f"{self.name}: an Airflow scenario keeps texts, not queries")
        return self

    @property
    def is_code_bug(self) -> bool:
        return self.expect == "fixed"

    @property
    def is_escalation(self) -> bool:
        return self.expect == "escalated"


def load_scenario(path: Path) -> Scenario:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return Scenario.model_validate({**data, "path": path})
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        first = str(exc).strip().splitlines()
        raise BadInputError(
            f"{path}: not a valid benchmark scenario ({' '.join(first[:3])}); "
            "see benchmarks/README.md for the format"
        ) from exc


def load_corpus(corpus_dir: Path, only: list[str] | None = None) -> list[Scenario]:
    """The scenarios of `corpus_dir` in name order, or the ones named in `only`."""
    if not corpus_dir.is_dir():
        raise BadInputError(f"{corpus_dir}: no such corpus directory; pass --corpus DIR")
    scenarios = [load_scenario(p) for p in sorted(corpus_dir.glob("*.toml"))]
    names = [s.name for s in scenarios]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise BadInputError(f"{corpus_dir}: duplicate scenario names {duplicates}")
    if only:
        unknown = [n for n in only if n not in names]
        if unknown:
            raise BadInputError(
                f"--only {','.join(unknown)}: no such scenario in {corpus_dir}; "
                f"known: {', '.join(names)}"
            )
        scenarios = [s for s in scenarios if s.name in only]
    if not scenarios:
        raise BadInputError(f"{corpus_dir}: no scenario (*.toml) to run")
    return scenarios


def projects_dir(corpus_dir: Path) -> Path:
    """Base projects live in `<corpus>/projects/` or beside the corpus (`../projects/`)."""
    for candidate in (corpus_dir / "projects", corpus_dir.parent / "projects"):
        if candidate.is_dir():
            return candidate
    raise BadInputError(
        f"{corpus_dir}: no base projects found in {corpus_dir / 'projects'} or "
        f"{corpus_dir.parent / 'projects'}"
    )


def apply_edits(root: Path, edits: list[Edit]) -> None:
    """Apply a scenario's breaking change inside `root`; a search text must occur once."""
    for edit in edits:
        target = root / edit.path
        if edit.content is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(edit.content, encoding="utf-8")
        elif edit.delete:
            target.unlink()
        elif edit.rename_to is not None:
            dest = root / edit.rename_to
            dest.parent.mkdir(parents=True, exist_ok=True)
            target.rename(dest)
        else:
            assert edit.search is not None
            text = target.read_bytes().decode("utf-8")
            search, replace = edit.search, edit.replace
            if "\r\n" in text:  # a CRLF file stays CRLF (the scenario writes "\n")
                search, replace = (s.replace("\n", "\r\n") for s in (search, replace))
            count = text.count(search)
            if count != 1:
                raise BadInputError(
                    f"{edit.path}: the search text occurs {count} times (must be once): "
                    f"{edit.search[:80]!r}"
                )
            target.write_bytes(text.replace(search, replace).encode("utf-8"))
