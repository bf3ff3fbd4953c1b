"""The evidence bundle: everything a classifier or strategy may read about one failure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from patchit.events.model import RuntimeFrame, UniversalFailureEvent


class Relation(BaseModel):
    """An upstream relation of the failing unit and the columns it really has."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="model/seed/source name as used in ref()/source()")
    unique_id: str | None = None
    relation: str | None = Field(default=None, description="database.schema.identifier")
    columns: list[str] = Field(default_factory=list)


class ProjectIndex(BaseModel):
    """Names that exist in the dbt project, for near-match fix-its."""

    model_config = ConfigDict(extra="forbid")

    models: list[str] = Field(default_factory=list)
    seeds: list[str] = Field(default_factory=list)
    snapshots: list[str] = Field(default_factory=list)
    sources: list[tuple[str, str]] = Field(
        default_factory=list, description="(source_name, table_name)"
    )
    macros: list[str] = Field(
        default_factory=list, description="project and package macros, plus dbt built-ins"
    )
    model_paths: list[str] = Field(default_factory=lambda: ["models"])
    project_name: str | None = None
    packages: list[str] = Field(
        default_factory=list, description="installed dbt packages (dbt_packages/*)"
    )


class TracebackFrame(BaseModel):
    """One frame of a Python traceback that runs code of the repository."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="file relative to the repo root")
    line: int
    function: str
    code: str = Field(default="", description="the source line the traceback printed")
    locals: dict[str, str] = Field(
        default_factory=dict, description="local variables, when the traceback captured them"
    )


class ConversionFinding(BaseModel):
    """Where a value that does not fit its type lives: the column, its type, a few values."""

    model_config = ConfigDict(extra="forbid")

    value: str = Field(description="the value the error names")
    target_type: str = Field(description="the type it did not convert to (INTEGER, DATE, ...)")
    column: str
    relation: str = Field(description="a warehouse relation, or a data file of the repo")
    column_type: str | None = Field(default=None, description="the column's type there")
    samples: list[str] = Field(default_factory=list, description="a few offending values")
    changed: bool = Field(
        default=False, description="the relation is a data file the breaking change edited"
    )


class TypeChange(BaseModel):
    """A column whose type differs from the last good run: upstream schema drift."""

    model_config = ConfigDict(extra="forbid")

    relation: str = Field(description="a source or package relation, or a data file of the repo")
    column: str
    old: str = Field(description="its type at the last good run")
    new: str = Field(description="its type now")

    def describe(self) -> str:
        return f"{self.relation}.{self.column} {self.old} -> {self.new}"


class Evidence(BaseModel):
    """Redacted evidence for one failure; paths are relative to `repo_root`."""

    model_config = ConfigDict(extra="forbid")

    event: UniversalFailureEvent
    repo_root: str
    project_dir: str | None = Field(default=None, description="dbt project dir, relative to repo")
    unit_path: str | None = Field(default=None, description="failing file, relative to repo")
    unit_name: str | None = None
    raw_code: str | None = None
    compiled_code: str | None = None
    upstream: list[Relation] = Field(default_factory=list)
    properties: dict[str, str] = Field(
        default_factory=dict, description="YAML files describing the unit: path -> text"
    )
    tests: list[str] = Field(default_factory=list, description="tests attached to the unit")
    error: str = ""
    git_log: list[str] = Field(default_factory=list, description="recent commits of the files")
    changed_files: list[str] = Field(
        default_factory=list, description="files changed since the last good commit (or HEAD~1)"
    )
    last_good_commit: str | None = None
    change_base: str | None = Field(
        default=None,
        description="full id of the commit the change is measured from: the last good "
        "commit, else the failing commit's parent",
    )
    breaking_diff: str = Field(
        default="", description="diff of the last good commit (or HEAD~1) to the failing commit"
    )
    index: ProjectIndex = Field(default_factory=ProjectIndex)
    notes: list[str] = Field(default_factory=list, description="what could not be gathered")
    test_kind: str | None = Field(
        default=None, description="for a data test: not_null, unique, ..., or 'singular'"
    )
    tested_model: str | None = Field(default=None, description="for a data test: model tested")
    tested_column: str | None = None
    tested_model_path: str | None = Field(
        default=None, description="file of the tested model, relative to repo"
    )
    failing_rows: list[dict[str, str]] = Field(
        default_factory=list, description="sample of the rows a failing data test returned"
    )
    related_code: dict[str, str] = Field(
        default_factory=dict, description="other code that matters (the tested model): path -> text"
    )
    frames: list[TracebackFrame] = Field(
        default_factory=list, description="in-repo traceback frames, outermost first"
    )
    callable_name: str | None = Field(default=None, description="the task's Python callable")
    callable_code: str | None = Field(default=None, description="source of the task's callable")
    packed_log: str = Field(
        default="", description="the error and in-repo frames with context, packed to a budget"
    )
    rendered_fields: dict[str, str] = Field(
        default_factory=dict, description="rendered template fields of the task, when known"
    )
    conversion: ConversionFinding | None = Field(
        default=None, description="for a conversion error: the column holding the value"
    )
    yaml_error_at: str = Field(
        default="", description="a broken YAML file's line, as the YAML parser marks it"
    )
    type_changes: list[TypeChange] = Field(
        default_factory=list,
        description="columns read from outside the repo whose type moved since the last good run",
    )
    built_in_run: str = Field(
        default="",
        description="the relation the error says is missing, as `schema.table`, when the "
        "warehouse the run left holds it: the run built it after the unit read it",
    )
    runtime_change: str = Field(
        default="",
        description="dbt or its adapter upgraded since the last good build, as `duckdb 1.10.0 "
        "-> 1.11.1`; empty when the same, or unknown",
    )
    runtime_locals: RuntimeFrame | None = Field(
        default=None,
        description="the failing in-repo frame's locals as names and types, captured at run "
        "time; its path relative to the repo",
    )

    @property
    def unit_changed(self) -> bool:
        return self.unit_path is not None and self.unit_path in self.changed_files
