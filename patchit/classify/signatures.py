"""The ordered table of error signatures the classifier matches, first match wins.

Order matters: narrow signatures come before broad ones (`Catalog "main" does not exist` is a
Binder Error but a version problem; `Env var required` arrives as a Parsing Error). Each
signature is data plus, where the class depends on the evidence, a small predicate.
Reason templates may use {excerpt} (the error line), {unit}, {unit_path}, {name} (the first
regex group), {changed} (what changed, or that nothing did).
Action templates may also use {select} (node to re-run), {project_dir}, {last_good} and {failing}
(the change's commits), {flags} (the user's --profiles-dir and --target), {profiles_yml}; an
action that formats to "" is left out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from patchit.classify.change_lines import written_by_change
from patchit.classify.model import FailureClass
from patchit.classify.snowflake_errors import (
    SF_AUTH,
    SF_CONVERSION,
    SF_EMULATOR_PARSE,
    SF_MISSING_RELATION,
    SF_PRIVILEGES,
    SF_SQL,
    SF_WAREHOUSE,
)
from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.evidence.unit_files import is_data_file

Predicate = Callable[[Evidence, "re.Match[str]"], bool]

_C = FailureClass


@dataclass(frozen=True)
class Signature:
    name: str
    cls: FailureClass
    pattern: re.Pattern[str]
    reason: str
    next_actions: tuple[str, ...] = ()
    when: Predicate | None = None
    statuses: tuple[str, ...] = ()  # when set, the event status must be one of these


def _rx(text: str) -> re.Pattern[str]:
    return re.compile(text, re.IGNORECASE | re.MULTILINE)


def changed_code(evidence: Evidence) -> list[str]:
    """Changed files among the failing unit, the tested model and the upstream models."""
    names = {r.name for r in evidence.upstream} | {evidence.unit_name, evidence.tested_model}
    hits = []
    for path in evidence.changed_files:
        stem, _, suffix = path.rpartition("/")[2].rpartition(".")
        if suffix not in ("sql", "py"):
            continue  # an edited schema.yml or seed CSV is not a change of the SQL
        if path in (evidence.unit_path, evidence.tested_model_path) or stem in names:
            hits.append(path)
    return hits


# Files that neither run nor feed a pipeline: a note beside a data refresh changes nothing.
_DOC_SUFFIXES = (".md", ".rst", ".txt", ".adoc")
_DOC_NAMES = ("readme", "changelog", "license", "notice", "authors", "codeowners")


def is_doc_file(path: str) -> bool:
    name = path.rpartition("/")[2].lower()
    return name.endswith(_DOC_SUFFIXES) or name.partition(".")[0] in _DOC_NAMES


def changed_data_files(evidence: Evidence) -> list[str]:
    """The changed data files (a seed or landing CSV, a JSON or Parquet file in the repo),
    when the breaking change touched nothing else but documentation; [] when any code,
    config or other file changed, or no data file did."""
    changed = [p for p in evidence.changed_files if not is_doc_file(p)]
    if changed and all(is_data_file(path) for path in changed):
        return changed
    return []


def _only_data_changed(evidence: Evidence, _m: re.Match[str]) -> bool:
    files = changed_data_files(evidence)
    return bool(files) and not _seed_renamed_away(evidence, files)


_MISSING_NODE = re.compile(r"depends on a node named '(?P<name>[^']+)' which was not found")


def _seed_renamed_away(evidence: Evidence, files: list[str]) -> bool:
    """The node a ref misses is a seed whose CSV the change renamed or deleted: the project's
    structure changed, not its data (`git mv seeds/raw_orders.csv seeds/raw_sales_orders.csv`
    with `ref('raw_orders')` left is a code bug that `fix_ref` follows)."""
    found = _MISSING_NODE.search(
        "\n".join(filter(None, [evidence.error, evidence.event.error_message]))
    )
    return found is not None and any(
        p.lower().endswith(".csv") and PurePosixPath(p).stem == found["name"] for p in files
    )


def _code_changed(evidence: Evidence, _m: re.Match[str]) -> bool:
    return bool(changed_code(evidence))


def _upstream_types_moved(evidence: Evidence, m: re.Match[str]) -> bool:
    """A column read from outside the repo changed type and the SQL reading it did not."""
    return bool(evidence.type_changes) and not _code_changed(evidence, m)


def _runtime_moved(evidence: Evidence, m: re.Match[str]) -> bool:
    """dbt or its adapter was upgraded since the last good build and the code did not change."""
    return bool(evidence.runtime_change) and not _code_changed(evidence, m)


def _code_unchanged(evidence: Evidence, m: re.Match[str]) -> bool:
    return not _code_changed(evidence, m)


def _is_test(evidence: Evidence) -> bool:
    return evidence.event.unit_id.startswith("test.") or evidence.test_kind is not None


def _test_changed(evidence: Evidence, m: re.Match[str]) -> bool:
    return _is_test(evidence) and _code_changed(evidence, m)


def _test_unchanged(evidence: Evidence, m: re.Match[str]) -> bool:
    return _is_test(evidence) and not _code_changed(evidence, m)


def _missing_package(evidence: Evidence, m: re.Match[str]) -> bool:
    """'dbt_utils' is undefined where the code calls dbt_utils.x and no such package is there."""
    name = m.group(1)
    code = (evidence.raw_code or "") + (evidence.compiled_code or "")
    calls_namespace = re.search(rf"\b{re.escape(name)}\.\w+\s*\(", code) is not None
    return calls_namespace and name not in evidence.index.packages


def near_macros(evidence: Evidence, name: str) -> list[str]:
    plain = [m.rpartition(".")[2] for m in evidence.index.macros]
    return difflib.get_close_matches(name, sorted(set(plain)), n=3, cutoff=0.75)


def _near_macro(evidence: Evidence, m: re.Match[str]) -> bool:
    return m.group(1) not in evidence.index.macros and bool(near_macros(evidence, m.group(1)))


_SUGGESTED = re.compile(r'\s*Did you mean "([^"]+)"\?')


def _relation_in_project(evidence: Evidence, m: re.Match[str]) -> bool:
    """The missing relation is the project's, or DuckDB's `Did you mean "x"` names a project
    relation near it (a misspelt table name is the SQL's fault, not the warehouse's). Postgres
    suggests nothing: there the one project relation nearest the name counts."""
    name = next(g for g in m.groups() if g)
    table = name.rpartition(".")[2].strip('"').lower()
    index = evidence.index
    names = index.models + index.seeds + index.snapshots + [t for _, t in index.sources]
    project = {n.lower() for n in names}
    if table in project:
        return True
    if m.group(1) is None:  # Postgres's `relation "s.x" does not exist`, Snowflake's `Object`
        return nearest(table, project) is not None
    said = _SUGGESTED.match(m.string, m.end() + 1)  # after the "!" that ends the sentence
    suggested = said.group(1).rpartition(".")[2].lower() if said else ""
    return suggested in project and nearest(table, [suggested]) == suggested


# A value that does not fit its type: DuckDB's casts, Python's int()/float() on a string.
_CONVERSION = (r"(Conversion Error|Could not convert string|invalid literal for int\(\)"
               r"|could not convert string to float|" + SF_CONVERSION + ")")  # fmt: skip
# Postgres: a value the SQL cannot take (a bad cast, a zero divisor, an overflow) or a row a
# constraint refuses. Like a DuckDB cast, the data's fault unless the SQL that makes it changed.
_PG_DATA = (
    r"(invalid input syntax for type|(?<!ZeroDivisionError: )division by zero"
    r"|value too long for type"
    r"|numeric field overflow|out of range for type"
    r"|\b(?:small|big)?int(?:eger)? out of range|violates not-null constraint"
    r"|duplicate key value violates unique constraint|violates check constraint"
    r"|violates foreign key constraint|more than one row returned by a subquery)"
)
# Postgres: the SQL names what is not there, or does not parse (DuckDB's Binder/Parser Error)
_PG_SQL = (
    r"(column [\w.\"]+ does not exist|missing FROM-clause entry for table"
    r"|function [^\n]+ does not exist|operator does not exist"
    r"|must appear in the GROUP BY clause|column reference \"[^\"]+\" is ambiguous"
    r"|each \w+ query must have the same number of columns|specified more than once"
    r"|syntax error at end of input)"
)
# DuckDB's catalog error, or Postgres's or Snowflake's (groups 2, 3: no "Did you mean" follows)
_MISSING_RELATION = (
    r"Catalog Error: (?:Table|View) with name ([\w.\"]+) does not exist"
    r"|relation \"([^\"]+)\" does not exist|" + SF_MISSING_RELATION
)


def _built_in_run(evidence: Evidence, _m: re.Match[str]) -> bool:
    """The relation was missing when the unit ran and is in the warehouse the run left."""
    return bool(evidence.built_in_run)


def _name_written_by_change(evidence: Evidence, m: re.Match[str]) -> bool:
    """The missing relation's name is one the breaking change wrote in the failing file."""
    return written_by_change(evidence, next(g for g in m.groups() if g))


_RERUN = "dbt build --select {select}{flags}"
_PARSE = "dbt parse --project-dir {project_dir}{flags}"
_READ_UNIT = "read {unit_path}"
_LOG = "git log -p -n 3 -- {unit_path}"

SIGNATURES: tuple[Signature, ...] = (
    # --- environment: the code is fine, this runtime lacks something ---------------------
    Signature("missing_profile", _C.ENV_MISMATCH, _rx(r"Could not find profile named '([^']+)'"),
              "dbt found no profile named '{name}' in this environment ({excerpt}), so no code "
              "change can help.",
              ("check `profile:` in dbt_project.yml against {profiles_yml}",
               "dbt debug --project-dir {project_dir}{flags}", "{profiles_hint}")),
    Signature("missing_env_var", _C.ENV_MISMATCH,
              _rx(r"Env var required but not provided: '([^']+)'"),
              "the environment variable {name} is not set where dbt ran ({excerpt}).",
              ("export {name} in the runtime (scheduler, CI secrets, .env loader)",
               "grep -rn \"env_var('{name}'\" {project_dir}")),
    Signature("missing_target", _C.ENV_MISMATCH,
              _rx(r"does not have a target named '([^']+)'"),
              "the profile has no target '{name}' in this environment ({excerpt}).",
              ("list the targets in profiles.yml", "dbt debug --target <existing target>")),
    Signature("missing_profiles_yml", _C.ENV_MISMATCH,
              _rx(r"(profiles\.yml)(?: file)? (?:not found|does not exist|is missing)"),
              "no profiles.yml was found where dbt looked ({excerpt}).",
              ("dbt debug --config-dir{flags}", "{profiles_hint}")),
    Signature("missing_profiles_dir", _C.ENV_MISMATCH,
              _rx(r"Path '([^']+)' does not exist"),
              "the profiles directory {name} does not exist where dbt ran ({excerpt}).",
              ("create {name}/profiles.yml or pass --profiles-dir / set DBT_PROFILES_DIR",)),
    # --- dependencies: installed versions/packages out of step ----------------------------
    Signature("duckdb_catalog_main", _C.DEPENDENCY_ISSUE,
              _rx(r"Catalog \"(main)\" does not exist"),
              "DuckDB reports that catalog \"main\" does not exist, the known symptom of a duckdb "
              "release newer than the installed dbt-duckdb supports ({excerpt}).",
              ("pip show duckdb dbt-duckdb", "pin duckdb to a version dbt-duckdb supports")),
    Signature("packages_not_installed", _C.DEPENDENCY_ISSUE,
              _rx(r"dbt found (\d+) package\(s\) specified in packages\.yml, but only \d+"),
              "packages.yml declares {name} package(s) that are not installed ({excerpt}).",
              ("dbt deps --project-dir {project_dir}", "add `dbt deps` before the build step")),
    Signature("module_missing", _C.DEPENDENCY_ISSUE, _rx(r"No module named '?([\w.]+)'?"),
              "the Python module {name} is not importable in dbt's environment ({excerpt}).",
              ("python -c 'import {name}' in dbt's environment", "pip check",
               "pip show dbt-core dbt-adapters")),
    Signature("adapter_missing", _C.DEPENDENCY_ISSUE,
              _rx(r"Could not find adapter type (\w+)|adapter[^\n]* not found"),
              "the dbt adapter for this profile is not installed ({excerpt}).",
              ("pip install dbt-<adapter>", "dbt --version")),
    Signature("version_incompatible", _C.DEPENDENCY_ISSUE,
              _rx(r"(\S+)[^\n]*\bNot compatible\b|is not compatible with|require-dbt-version"),
              "installed dbt core and adapter/package versions are out of step ({excerpt}).",
              ("dbt --version", "pip check", "align versions in requirements / packages.yml")),
    Signature("undefined_package_macro", _C.DEPENDENCY_ISSUE, _rx(r"'([\w]+)' is undefined"),
              "the code calls {name}.<macro>() but the package {name} is not installed "
              "({excerpt}).",
              ("dbt deps --project-dir {project_dir}", "check packages.yml lists {name}"),
              when=_missing_package),
    # --- infrastructure: the platform failed, not the code --------------------------------
    Signature("database_lock", _C.INFRA_ISSUE,
              _rx(r"Could not set lock on file \"?([^\"\s:]+)|Conflicting lock is held"),
              "another process held the database lock on {name} ({excerpt}).",
              ("find the other writer: lsof {name}", "serialize jobs writing to this database",
               "re-run: " + _RERUN)),
    Signature("lock_conflict", _C.INFRA_ISSUE,
              _rx(r"(deadlock detected|could not obtain lock on relation|due to lock timeout"
                  r"|could not serialize access due to concurrent update)"),
              "the warehouse aborted the statement on a lock conflict with another session "
              "({excerpt}).",
              ("check the warehouse's sessions and locks (pg_locks)",
               "serialize jobs writing these relations", "re-run: " + _RERUN)),
    Signature("connection_failed", _C.INFRA_ISSUE,
              _rx(r"(connection refused|connection reset|could not connect to server"
                  r"|server closed the connection|broken pipe|network is unreachable"
                  r"|the database system is (?:starting up|shutting down|in recovery mode)"
                  r"|terminating connection due to administrator command)"),
              "the warehouse connection failed ({excerpt}).",
              ("check the warehouse/proxy is up", "dbt debug", "re-run: " + _RERUN)),
    Signature("too_many_connections", _C.INFRA_ISSUE,
              _rx(r"(too many clients already|too many connections"
                  r"|remaining connection slots are reserved)"),
              "the warehouse refused a new connection: its connection slots are full ({excerpt}).",
              ("check the warehouse's open sessions (pg_stat_activity)",
               "lower dbt's threads or add a connection pooler", "re-run: " + _RERUN)),
    Signature("dns_failure", _C.INFRA_ISSUE,
              _rx(r"(Name or service not known|Temporary failure in name resolution"
                  r"|getaddrinfo failed|nodename nor servname|Could not resolve host)"),
              "a host name could not be resolved ({excerpt}).",
              ("check DNS / the host in profiles.yml", "dbt debug")),
    Signature("timeout", _C.INFRA_ISSUE,
              _rx(r"(timed out|timeout expired|statement timeout|deadline exceeded)"),
              "the operation timed out ({excerpt}).",
              ("check warehouse load and query duration", "re-run: " + _RERUN)),
    Signature("warehouse_unavailable", _C.INFRA_ISSUE, _rx(SF_WAREHOUSE),
              "the Snowflake warehouse could not run the query ({excerpt}).",
              ("check the warehouse's state and its resource monitor's quota",
               "check `warehouse:` in the profile", "re-run: " + _RERUN)),
    Signature("permission_denied", _C.INFRA_ISSUE,
              _rx(r"(Permission denied|insufficient privilege|access denied|"
                  + SF_PRIVILEGES + ")"),
              "the runtime was denied access ({excerpt}).",
              ("check file/database grants for the dbt user",)),
    Signature("disk_full", _C.INFRA_ISSUE,
              _rx(r"(No space left on device|disk (?:is )?full|Disk quota exceeded"
                  r"|Out of Memory Error|could not allocate)"),
              "the machine ran out of disk or memory ({excerpt}).",
              ("df -h; free -m on the runner", "re-run: " + _RERUN)),
    Signature("http_5xx", _C.INFRA_ISSUE,
              _rx(r"\b(5\d\d)\b[^\n]{0,40}(Server Error|Bad Gateway|Service Unavailable"
                  r"|Gateway Time-?out)|HTTP(?: Error)? (5\d\d)"),
              "a remote service answered with a server error ({excerpt}).",
              ("check the service status", "re-run: " + _RERUN)),
    Signature("auth_rejected", _C.INFRA_ISSUE,
              _rx(r"(password authentication failed|\b401\b[^\n]*Unauthorized|invalid credentials"
                  r"|authentication failed|FATAL:\s+role \"[^\"]+\" does not exist"
                  r"|no pg_hba\.conf entry|" + SF_AUTH + ")"),
              "the warehouse rejected the credentials ({excerpt}).",
              ("refresh the credentials in the secret store", "dbt debug")),
    # --- the runtime moved under unchanged code: dbt or the adapter was upgraded ----------
    Signature("runtime_upgraded", _C.ENV_MISMATCH, _rx(r"(\S)"),
              "{unit} fails ({excerpt}) after an upgrade of what runs it since the last good "
              "build at {last_good} ({runtime_change}) while {changed}: the new version refuses "
              "what the old one ran, so no code change of the breaking kind can explain it.",
              ("read the changelog of the upgraded package for what it now refuses",
               "pin the previous version to confirm: {runtime_pins}", _RERUN),
              when=_runtime_moved, statuses=("error", "parse_error")),
    # --- data tests: the data changed, or the code that makes it did ----------------------
    Signature("data_test_code_changed", _C.CODE_BUG, _rx(r"(.)"),
              "data test {unit} failed ({excerpt}) and {changed}, so the change likely broke it.",
              ("git diff {last_good}..{failing} -- {changed_paths}", "dbt test --select {select}"),
              when=_test_changed, statuses=("fail",)),
    Signature("data_test_failed", _C.DATA_ISSUE, _rx(r"(.)"),
              "data test {unit} failed ({excerpt}) while {changed}, so the data changed.",
              ("dbt test --select {select} --store-failures",
               "inspect the failing rows of {unit}", "trace the upstream source of {select}"),
              when=_test_unchanged, statuses=("fail",)),
    Signature("unit_test_failed", _C.CODE_BUG, _rx(r"(.)"),
              "dbt unit test {unit} failed ({excerpt}): the model's logic disagrees with the "
              "expected rows its owners wrote.",
              ("dbt test --select {unit}", "read the unit test's given/expect rows"),
              when=lambda ev, _m: ev.event.unit_id.startswith("unit_test."),
              statuses=("fail", "error")),
    # --- upstream schema drift: a column outside the repo changed type --------------------
    Signature("upstream_type_drift", _C.DATA_ISSUE,
              _rx(r"(Binder Error|Conversion Error|Could not convert|No function matches"
                  r"|operator does not exist|function [^\n]+ does not exist"
                  r"|invalid input syntax for type|cannot cast)"),
              "{unit} fails ({excerpt}) and a column it reads from outside the repo changed type "
              "since {last_good} ({type_changes}): upstream schema drift, not a code bug.",
              ("tell the owner of the upstream data: {type_changes}",
               "git diff --stat {last_good}..{failing}", _RERUN),
              when=_upstream_types_moved),
    # --- only data files changed: whatever broke, the code did not ------------------------
    Signature("data_files_changed", _C.DATA_ISSUE, _rx(r"^(.)"),
              "{unit} fails ({excerpt}) and only data files changed since {last_good} "
              "({data_files}): the data changed, not the code.",
              ("git diff {last_good}..{failing} -- {data_files}",
               "check the changed rows against what {select} expects", _RERUN),
              when=_only_data_changed),
    # --- data vs code on conversion -------------------------------------------------------
    Signature("conversion_code_changed", _C.CODE_BUG, _rx(_CONVERSION),
              "a cast failed ({excerpt}) and {changed}, so the changed SQL likely causes it.",
              (_READ_UNIT, "git diff {last_good}..{failing} -- {changed_paths}", _RERUN),
              when=_code_changed),
    Signature("conversion_data", _C.DATA_ISSUE, _rx(_CONVERSION),
              "a cast failed on values in the data ({excerpt}) while {changed}.",
              ("query the offending column upstream of {select}", _RERUN)),
    Signature("pg_data_code_changed", _C.CODE_BUG, _rx(_PG_DATA),
              "the warehouse refused a value ({excerpt}) and {changed}, so the changed SQL likely "
              "causes it.",
              (_READ_UNIT, "git diff {last_good}..{failing} -- {changed_paths}", _RERUN),
              when=_code_changed),
    Signature("pg_data", _C.DATA_ISSUE, _rx(_PG_DATA),
              "the warehouse refused a value in the data ({excerpt}) while {changed}.",
              ("query the offending rows upstream of {select}", _RERUN)),
    # --- code: the fix belongs in this repository -----------------------------------------
    Signature("missing_node", _C.CODE_BUG,
              _rx(r"depends on a (?:node|source) named '([^']+)'[^\n]*(?:not found|was not found)"),
              "{unit} refers to '{name}', which is not a node of this project ({excerpt}); "
              "{changed}.", (_READ_UNIT, _PARSE)),
    Signature("cycle", _C.CODE_BUG, _rx(r"Found a cycle: ([^\n]+)"),
              "the DAG has a cycle ({name}); {changed}.", (_READ_UNIT, _PARSE)),
    Signature("undefined_macro_near_name", _C.CODE_BUG, _rx(r"'([\w]+)' is undefined"),
              "'{name}' is called but is not a macro of this project or its packages, and a "
              "near-named macro exists ({excerpt}); {changed}.",
              (_READ_UNIT, "ls {project_dir}/macros", _PARSE), when=_near_macro),
    Signature("undefined_macro", _C.CODE_BUG, _rx(r"'([\w]+)' is undefined"),
              "'{name}' is called but is defined nowhere in the project, its packages or dbt "
              "({excerpt}); {changed}.", (_READ_UNIT, "dbt deps", _PARSE)),
    Signature("yaml_invalid", _C.CODE_BUG,
              _rx(r"(Invalid \w+ config given in [^\s]+|Error reading \S+: ([^\s]+\.ya?ml)"
                  r"|Syntax error near line|is not of type|Additional properties are not allowed)"),
              "a YAML properties file is invalid ({excerpt}){yaml_at}.",
              ("read {unit_path}", _PARSE)),
    Signature("relation_built_later", _C.ENV_MISMATCH, _rx(_MISSING_RELATION),
              "{unit} read {built} before it existed, and the same run built it afterwards: "
              "dbt does not order a source after the seed or model that writes it, so on a "
              "warehouse that lacks it the reader comes first ({excerpt}). The SQL is not "
              "wrong: a second build passes.",
              ("run the build again, or `dbt seed` (or build what writes {built}) first",
               "read it with ref() instead of source() so dbt orders the two"),
              when=_built_in_run),
    Signature("catalog_error_project", _C.CODE_BUG, _rx(_MISSING_RELATION),
              "the SQL reads {name}, a relation of this project that does not exist under that "
              "name ({excerpt}); {changed}.", (_READ_UNIT, _RERUN),
              when=_relation_in_project),
    Signature("catalog_error_changed_line", _C.CODE_BUG, _rx(_MISSING_RELATION),
              "the SQL reads {name}, a name the change wrote on a line it added ({excerpt}); "
              "{changed}.", (_READ_UNIT, "git diff {last_good}..{failing} -- {unit_path}",
                             _RERUN),
              when=_name_written_by_change),
    Signature("catalog_error_external", _C.ENV_MISMATCH, _rx(_MISSING_RELATION),
              "the SQL reads {name}, which this project does not define and this environment "
              "lacks ({excerpt}).", ("check the relation exists in the target", _READ_UNIT)),
    Signature("sql_error", _C.CODE_BUG,
              _rx(r"(Binder Error|Parser Error|Catalog Error|syntax error at or near)|"
                  + _PG_SQL + "|" + SF_SQL + "|" + SF_EMULATOR_PARSE),
              "the SQL of {unit} does not bind/parse ({excerpt}); {changed}.",
              (_READ_UNIT, "compare with the upstream columns in the evidence", _RERUN)),
    Signature("compilation_error", _C.CODE_BUG, _rx(r"(Compilation Error)"),
              "{unit} failed to compile ({excerpt}); {changed}.", (_READ_UNIT, _PARSE)),
)  # fmt: skip
