"""The ordered signatures for Airflow task failures and broken DAG files, first match wins.

Narrow before broad: the configuration a task lacks (a Connection, a Variable, an environment
variable), missing packages, outages and refused credentials, explicit checks on upstream data,
and only then "a Python exception raised in repository code", which is a code bug. The text
matched first is the packed error (the final exception plus its causes), so an outage wrapped
in a library's exception still reads as an outage.
Reason/action templates use the classifier's fields, plus {dag} (the dag_id).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from patchit.classify.model import FailureClass
from patchit.classify.signatures import SIGNATURES, Signature, changed_data_files
from patchit.evidence.model import Evidence, TracebackFrame
from patchit.evidence.pylog import is_write_call, parse_frames, repo_relative
from patchit.evidence.similarity import nearest
from patchit.evidence.templates import REMOVED_TEMPLATE_VARS, REMOVED_WITHOUT_EQUIVALENT
from patchit.evidence.templates import reads_variable as template_reads

_C = FailureClass
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "site-packages", "__pycache__", ".tox"}
_MAX_SCAN_FILES = 20_000
_CHECK_ERRORS = re.compile(r"(ValueError|AssertionError|\w*(?:Validation|DataQuality|Check)\w*)$")


def _rx(text: str) -> re.Pattern[str]:
    return re.compile(text, re.IGNORECASE | re.MULTILINE)


def _general(name: str, *actions: str) -> Signature:
    """A signature of the general table, with Airflow next actions instead of dbt ones."""
    return replace(next(s for s in SIGNATURES if s.name == name), next_actions=actions)


def innermost_frame(evidence: Evidence) -> TracebackFrame | None:
    return evidence.frames[-1] if evidence.frames else None


def airflow_changed_code(evidence: Evidence) -> list[str]:
    """Changed Python files among the DAG file and the files the traceback ran through."""
    ours = {evidence.unit_path, *(f.path for f in evidence.frames)}
    return [p for p in evidence.changed_files if p in ours and p.endswith(".py")]


def raised_in_repo(evidence: Evidence) -> bool:
    """Whether the innermost frame of the whole traceback is repository code (not a library)."""
    frames = parse_frames(evidence.event.traceback or "")
    if not frames:
        return False
    roots = [Path(p) for p in (evidence.event.repo_path, evidence.repo_root) if p]
    return repo_relative(frames[-1].path, roots) is not None


def repo_modules(evidence: Evidence) -> set[str]:
    """Dotted names of the Python modules and packages in the repository (bounded scan)."""
    root = Path(evidence.repo_root)
    found: set[str] = set()
    seen = 0
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
        rel = Path(current).relative_to(root).parts
        for name in files:
            seen += 1
            if name.endswith(".py"):
                parts = [*rel, name[:-3]] if name != "__init__.py" else list(rel)
                # a module is importable by any suffix of its path (sys.path may hold any folder)
                found.update(".".join(parts[i:]) for i in range(len(parts)) if parts[i:])
        if seen > _MAX_SCAN_FILES:
            break
    return found


def _module_in_repo(evidence: Evidence, m: re.Match[str]) -> bool:
    return m.group(1) in repo_modules(evidence)


def _module_near_repo(evidence: Evidence, m: re.Match[str]) -> bool:
    name, modules = m.group(1), repo_modules(evidence)
    return name not in modules and nearest(name, modules) is not None


def _module_outside_repo(evidence: Evidence, m: re.Match[str]) -> bool:
    return not _module_in_repo(evidence, m) and not m.group(1).startswith("airflow.")


def _env_lookup(evidence: Evidence, _m: re.Match[str]) -> bool:
    """A KeyError whose innermost repo line reads the environment or an Airflow Variable."""
    frame = innermost_frame(evidence)
    code = frame.code if frame else ""
    return re.search(r"\benviron\s*\[|\bVariable\.get\(|\bgetenv\(", code) is not None


def _write_missing_dir(evidence: Evidence, _m: re.Match[str]) -> bool:
    frame = innermost_frame(evidence)
    return frame is not None and is_write_call(frame.code)


def _explicit_check(evidence: Evidence, m: re.Match[str]) -> bool:
    """The task's own code raised on purpose (`raise ValueError(...)`, `assert ...`)."""
    frame = innermost_frame(evidence)
    if frame is None or not raised_in_repo(evidence):
        return False
    if _CHECK_ERRORS.search(evidence.event.error_type) is None:
        return False
    return re.match(r"(raise\s+\w|assert\s)", frame.code) is not None


def _explicit_check_changed(evidence: Evidence, m: re.Match[str]) -> bool:
    frame = innermost_frame(evidence)
    changed = airflow_changed_code(evidence)
    return _explicit_check(evidence, m) and frame is not None and frame.path in changed


def _value_error_on_unchanged_code(evidence: Evidence, _m: re.Match[str]) -> bool:
    """A value that does not fit its type while no code the task ran changed: the input did.
    Unknown history (no git) is not "unchanged"."""
    known = bool(evidence.changed_files) or not any("changed files" in n for n in evidence.notes)
    return known and not airflow_changed_code(evidence)


def _only_data_changed(evidence: Evidence, _m: re.Match[str]) -> bool:
    return bool(changed_data_files(evidence))


def template_names_code(evidence: Evidence, m: re.Match[str]) -> bool:
    """A Jinja `UndefinedError` is the repository's when the variable is one Airflow 3
    removed from the template context (the template must move forward), or when a file the
    change touched reads it in a template (the change wrote a name the runtime lacks)."""
    name = next(g for g in m.groups() if g)
    if evidence.event.error_type.rsplit(".", 1)[-1] != "UndefinedError":
        return False
    if name in REMOVED_TEMPLATE_VARS or name in REMOVED_WITHOUT_EQUIVALENT:
        return True
    root = Path(evidence.repo_root)
    for rel in evidence.changed_files[:50]:
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if template_reads(text, name):
            return True
    return False


def _in_repo(evidence: Evidence, _m: re.Match[str]) -> bool:
    return bool(evidence.frames)


_READ = "read {unit_path}"
_TEST = "airflow tasks test {dag} {unit}"
_DIFF = "git diff {last_good}..{failing} -- {changed_paths}"

AIRFLOW_SIGNATURES: tuple[Signature, ...] = (
    # --- environment: a Connection, Variable or variable this runtime lacks ---------------
    Signature("airflow_missing_connection", _C.ENV_MISMATCH,
              _rx(r"The conn_id [`'\"]?([\w.-]+)[`'\"]? isn't defined"),
              "the Airflow connection '{name}' is not defined where {unit} ran ({excerpt}).",
              ("airflow connections get {name}",
               "define it (UI, `airflow connections add {name}`, AIRFLOW_CONN_* or a secrets "
               "backend)")),
    Signature("airflow_missing_variable", _C.ENV_MISMATCH,
              _rx(r"(?:VARIABLE_NOT_FOUND[^\n]*?)?Variable [`'\"]?([\w.-]+)[`'\"]? "
                  r"(?:not found|does not exist)|(VARIABLE_NOT_FOUND)"),
              "the Airflow Variable '{name}' is not set where {unit} ran ({excerpt}).",
              ("airflow variables get {name}", "set it, or pass default_var to Variable.get")),
    Signature("airflow_missing_env_var", _C.ENV_MISMATCH, _rx(r"^KeyError: ['\"]?([^'\"\n]+)"),
              "{unit} reads the configuration key '{name}' that this environment does not "
              "define ({excerpt}).",
              ("export {name} for the Airflow workers (or set the Variable)", _READ),
              when=_env_lookup),
    # --- imports: typo in the repo, not on the path, or a package missing -----------------
    Signature("airflow_module_typo", _C.CODE_BUG, _rx(r"No module named '([\w.]+)'"),
              "{unit} imports '{name}', which is not a module of this repository, but a "
              "near-named one is ({excerpt}); {changed}.", (_READ, _TEST),
              when=_module_near_repo),
    Signature("airflow_module_not_on_path", _C.ENV_MISMATCH, _rx(r"No module named '([\w.]+)'"),
              "'{name}' exists in the repository but is not importable where the DAG ran: "
              "the DAG folder or PYTHONPATH differs ({excerpt}).",
              ("check dags_folder and PYTHONPATH of the workers", "package the helper module"),
              when=_module_in_repo),
    Signature("airflow_core_moved", _C.CODE_BUG,
              _rx(r"No module named '(airflow\.(?!providers\.)[\w.]+)'"
                  r"|cannot import name '\w+' from '(airflow\.(?!providers\.)[\w.]+)'"),
              "{unit} imports '{name}', which Airflow 3 moved or removed ({excerpt}); the "
              "import must change.", (_READ, "see Airflow 3's upgrade notes for the new path")),
    Signature("airflow_provider_missing", _C.DEPENDENCY_ISSUE,
              _rx(r"No module named '(airflow\.providers\.[\w.]+)'"
                  r"|cannot import name '\w+' from '(airflow\.providers\.[\w.]+)'"),
              "the provider module '{name}' is not installed or moved in the installed provider "
              "version ({excerpt}).", ("pip show apache-airflow-providers-<name>", "pip check")),
    Signature("python_package_missing", _C.DEPENDENCY_ISSUE, _rx(r"No module named '([\w.]+)'"),
              "the package '{name}' is not installed where {unit} ran ({excerpt}).",
              ("pip install the package in the Airflow image/requirements", "pip check"),
              when=_module_outside_repo),
    Signature("python_import_name_external", _C.DEPENDENCY_ISSUE,
              _rx(r"cannot import name '\w+' from '([\w.]+)'"),
              "the installed version of '{name}' lacks a name the code imports ({excerpt}).",
              ("pip show {name}", "pin the version the code was written for"),
              when=_module_outside_repo),
    # --- infrastructure: outages, limits, refused credentials -----------------------------
    Signature("airflow_task_timeout", _C.INFRA_ISSUE,
              _rx(r"(AirflowTaskTimeout|Process timed out|execution_timeout|ReadTimeout"
                  r"|ConnectTimeout|timed out)"),
              "{unit} ran past its time limit ({excerpt}).",
              ("compare the run time with execution_timeout", "check the system it waits on",
               _TEST)),
    Signature("airflow_task_killed", _C.INFRA_ISSUE,
              _rx(r"(SIGKILL|Negsignal|return code -9|AirflowTaskTerminated|zombie"
                  r"|MemoryError|OOMKilled|Killed)"),
              "the worker process running {unit} was killed ({excerpt}).",
              ("check the worker's memory limit and the task's memory use", "re-run: " + _TEST)),
    Signature("connection_failed", _C.INFRA_ISSUE,
              _rx(r"(connection refused|connection reset|could not connect to server"
                  r"|server closed the connection|broken pipe|network is unreachable"
                  r"|ConnectionRefusedError|ConnectionResetError|Max retries exceeded)"),
              "a service {unit} connects to refused or dropped the connection ({excerpt}).",
              ("check the service is up and reachable from the workers", "re-run: " + _TEST)),
    _general("dns_failure", "check DNS and the host in the Airflow connection"),
    Signature("http_server_error", _C.INFRA_ISSUE,
              _rx(r"HTTP(?: Error)? (5\d\d)|\b(5\d\d)\b[^\n]{0,40}(Server Error|Bad Gateway"
                  r"|Service Unavailable|Gateway Time-?out)"),
              "a remote service answered {unit} with a server error ({excerpt}).",
              ("check the service status", "re-run: " + _TEST)),
    Signature("http_auth_rejected", _C.INFRA_ISSUE,
              _rx(r"\b(40[13])\b[^\n]{0,40}(Unauthorized|Forbidden)|HTTP Error (40[13])"
                  r"|ApiException: \((40[13])\)|(password authentication failed)"),
              "a remote service rejected the credentials of {unit} ({excerpt}).",
              ("refresh the credentials in the connection or secrets backend",)),
    _general("database_lock", "find the other writer: lsof {name}", "re-run: " + _TEST),
    _general("disk_full", "df -h; free -m on the worker", "re-run: " + _TEST),
    # --- data: only data files changed, a value does not fit, or a check refused it -------
    Signature("data_files_changed", _C.DATA_ISSUE, _rx(r"^(.)"),
              "{unit} fails ({excerpt}) and only data files changed since {last_good} "
              "({data_files}): the data changed, not the code.",
              ("git diff {last_good}..{failing} -- {data_files}", "check the changed rows", _TEST),
              when=_only_data_changed),
    Signature("value_error_data", _C.DATA_ISSUE,
              _rx(r"(invalid literal for int\(\)[^\n]*|could not convert string to float[^\n]*"
                  r"|time data [^\n]* does not match format[^\n]*|Invalid isoformat string[^\n]*"
                  r"|\[<class 'decimal\.ConversionSyntax'>\]"
                  r"|Conversion Error[^\n]*|Could not convert string[^\n]*)"),
              "{unit} met a value that does not fit its type ({excerpt}) while {changed}: the "
              "input data changed, not the code.",
              ("find the row holding the value in the task's input", "trace the upstream source",
               _TEST),
              when=_value_error_on_unchanged_code),
    Signature("data_validation_library", _C.DATA_ISSUE,
              _rx(r"(pandera\.errors\.\w+|SchemaErrors?\b|great_expectations|ExpectationFailed"
                  r"|DataValidationError|DataQualityError)"),
              "a data validation rejected the rows {unit} received ({excerpt}).",
              ("inspect the upstream data the check names", "trace the upstream source")),
    Signature("data_check_code_changed", _C.CODE_BUG, _rx(r"^(\w+): "),
              "{unit} raised its own check ({excerpt}) and {changed}, so the changed check "
              "likely misfires.", (_DIFF, _TEST), when=_explicit_check_changed),
    Signature("data_check_failed", _C.DATA_ISSUE, _rx(r"^(\w+): "),
              "{unit} raised its own check on the data it received ({excerpt}) while {changed}.",
              ("inspect the upstream rows the message names", "trace the upstream task/source"),
              when=_explicit_check),
    # --- code: the fix belongs in this repository -----------------------------------------
    Signature("dag_import_error", _C.CODE_BUG, _rx(r"^(\w+)"),
              "the DAG file {unit_path} fails to import ({excerpt}); {changed}.",
              (_READ, "python {unit_path}", "airflow dags list-import-errors"),
              statuses=("import_error",)),
    Signature("airflow_template_undefined", _C.CODE_BUG,
              _rx(r"(?:UndefinedError: )?(?:'(\w+)' is undefined$"
                  r"|'[\w.]+ object' has no attribute '(\w+)')"),
              "a templated field of {unit} reads '{name}', which the template context does not "
              "define ({excerpt}); {changed}.",
              (_READ, "airflow tasks render {dag} {unit} <logical date>", _TEST),
              when=template_names_code),
    Signature("output_dir_missing", _C.CODE_BUG,
              _rx(r"FileNotFoundError: [^\n]*No such file or directory: '([^']+)'"),
              "{unit} writes {name} into a directory nobody created ({excerpt}); {changed}.",
              (_READ, _TEST), when=_write_missing_dir),
    Signature("input_file_missing", _C.ENV_MISMATCH,
              _rx(r"FileNotFoundError: [^\n]*No such file or directory: '([^']+)'"),
              "{unit} reads {name}, which is not there on this worker ({excerpt}): an upstream "
              "producer, a shared volume or a path differs.",
              ("check which task produces {name} and where it runs", "use shared storage")),
    Signature("python_error_in_repo", _C.CODE_BUG, _rx(r"^([\w.]+)(?::|$)"),
              "{unit} raised {name} in repository code ({excerpt}); {changed}.",
              (_READ, _TEST), when=_in_repo),
)  # fmt: skip
