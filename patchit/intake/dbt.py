"""dbt intake: turn a dbt invocation's failures into events (running dbt is `dbt_run`)."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.packages import package_path
from patchit.evidence.redact import (
    dbt_profile_secrets,
    environment_secrets,
    profile_secrets,
    redact,
)
from patchit.intake.dbt_run import project_name
from patchit.intake.gitinfo import read_remote_url
from patchit.intake.source_types import invocation_of
from patchit.text.dbt_args import dbt_command, option_value
from patchit.text.inputs import as_dict, as_list, as_path, as_str, is_regular_file

FAILED_STATUSES = {"error", "fail", "runtime error"}
# "Model 'model.shop.orders' (models/marts/orders.sql) depends on ..." and friends
_NODE_IN_MESSAGE = re.compile(
    r"\b[A-Z][a-z]+ '(?P<uid>[\w-]+\.[\w-]+\.[\w.-]+)' \((?P<path>[^)]+)\)"
)
_FILE_IN_MESSAGE = re.compile(
    r"given in (?P<path>[\w./-]+\.ya?ml)|\((?P<p2>[\w./-]+\.(?:sql|ya?ml|py))\)"
)
# dbt names a YAML file it could not read relative to a resource path: "Error reading shop:
# marts/extra.yml"
_READING_YAML = re.compile(r"Error reading [\w-]+: (?P<path>[\w./-]+\.ya?ml)\b")
_YAML_ERROR = re.compile(
    r"Error reading [\w-]+: [\w./-]+\.ya?ml|Invalid \w+ config given in [\w./-]+\.ya?ml"
    r"|Syntax error near line|is not of type|Additional properties are not allowed"
)
_RESOURCE_PATHS = (("model-paths", "models"), ("seed-paths", "seeds"),
                   ("snapshot-paths", "snapshots"), ("test-paths", "tests"),
                   ("analysis-paths", "analyses"), ("macro-paths", "macros"))  # fmt: skip
# most specific first: DuckDB's own error kinds, then dbt's wrappers around them
_ERROR_KINDS = (
    "Binder Error", "Parser Error", "Catalog Error", "Conversion Error", "IO Error",
    "Constraint Error", "Env var required", "Could not find profile", "Compilation Error",
    "Parsing Error", "Database Error", "Runtime Error",
)  # fmt: skip
_SECRET_ENV = re.compile(r"PASS|SECRET|TOKEN|KEY|CREDENTIAL", re.IGNORECASE)


def yaml_error_file(text: str, project_dir: Path) -> str | None:
    """The YAML file (relative to the project) a parse error is about, when it is a YAML
    error: that file, not a node, is the failing unit."""
    if _YAML_ERROR.search(text) is None:
        return None
    if m := _READING_YAML.search(text):
        try:
            config = yaml.safe_load((project_dir / "dbt_project.yml").read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            config = None
        config = config if isinstance(config, dict) else {}
        for key, default in _RESOURCE_PATHS:
            dirs = config.get(key) or [default]
            for folder in dirs if isinstance(dirs, list) else [dirs]:
                candidate = f"{str(folder).strip('/')}/{m.group('path')}"
                if (project_dir / candidate).is_file():
                    return candidate
        return None
    found = _FILE_IN_MESSAGE.search(text)
    path = (found.group("path") or found.group("p2")) if found else None
    return path if path and path.endswith((".yml", ".yaml")) else None


def tested_model_path(manifest_path: str | None, unit_test_id: str) -> str | None:
    """The SQL file of the model a unit test tests, from the run's manifest. A unit test that
    errors (not one whose rows disagree) failed on the model's SQL, compiled under the test's
    fixtures; and `dbt build` runs it before the model, so the model never reports the error
    itself: the model's file is the failing code, not the YAML the test is written in."""
    if not manifest_path:
        return None
    try:
        manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    manifest = as_dict(manifest)
    test = as_dict(as_dict(manifest.get("unit_tests")).get(unit_test_id))
    nodes = as_dict(manifest.get("nodes"))
    for uid in as_list(as_dict(test.get("depends_on")).get("nodes")):
        node = as_dict(nodes.get(uid))
        if node.get("resource_type") == "model" and node.get("name") == test.get("model"):
            return as_str(node.get("original_file_path"))
    return None


def _error_type(message: str, default: str) -> str:
    return next((kind for kind in _ERROR_KINDS if kind in message), default)


def _invocation(
    args: list[str], project_dir: Path, record: dict[str, Any], started: datetime
) -> DbtInvocation:
    command = dbt_command(args)
    raw_vars = option_value(args, "--vars")
    secrets = profile_secrets(raw_vars) if raw_vars else []  # {db_password: x} in YAML too
    args = [redact(a, secrets) for a in args]
    env = {
        k: ("***REDACTED***" if _SECRET_ENV.search(k) else v)
        for k, v in os.environ.items()
        if k.startswith("DBT_")
    }
    return DbtInvocation(
        command=command,
        args=args,
        project_dir=str(project_dir),
        profiles_dir=option_value(args, "--profiles-dir") or os.environ.get("DBT_PROFILES_DIR"),
        profile=option_value(args, "--profile"),
        target=option_value(args, "--target", "-t") or os.environ.get("DBT_TARGET"),
        vars=redact(raw_vars, secrets) if raw_vars is not None else None,
        cwd=os.getcwd(),
        env=env,
        invocation_id=record.get("invocation_id"),
        started_utc=started,
    ).with_raw_vars(raw_vars)


def _fresh_artifacts(
    project_dir: Path, args: list[str], started: datetime, invocation_id: object = None
) -> dict[str, str]:
    """Artifacts written by this invocation only (a stale run_results.json is never used):
    those whose metadata names the invocation's id when it is known (a run that failed at
    parse writes neither file, and the last run's, written a moment before, are not its),
    else those written since it started."""
    target_path = (
        option_value(args, "--target-path") or os.environ.get("DBT_TARGET_PATH") or "target"
    )
    target = (project_dir / (as_path(target_path) or "target")).resolve()
    found: dict[str, str] = {}
    for name in ("run_results", "manifest"):
        path = target / f"{name}.json"
        if not is_regular_file(path) or path.stat().st_mtime < started.timestamp() - 1:
            continue
        known = isinstance(invocation_id, str) and bool(invocation_id)
        if known and invocation_of(path) != invocation_id:
            continue
        found[name] = str(path)
    return found


def events_from_run(
    record: dict[str, Any],
    args: list[str],
    project_dir: Path,
    repo: Path | None,
    commit: str | None,
    started: datetime,
    uncommitted: dict[str, Any] | None = None,
) -> list[UniversalFailureEvent]:
    """One event per failed node of this invocation; one for a failure before any node ran.
    `uncommitted`: the snapshot of uncommitted work the run read (`commit` is the snapshot's),
    kept in each event's context (`patchit.intake.worktree_snapshot`)."""
    name = project_name(project_dir)
    invocation = _invocation(args, project_dir, record, started)
    raw_vars = invocation.replay_vars()
    # secrets rendered into messages or compiled SQL (var(), env_var(), the profile's own)
    # never reach storage
    secrets = [
        *(profile_secrets(raw_vars) if raw_vars else []),
        *dbt_profile_secrets(invocation.profiles_dir, project_dir),
        *environment_secrets(),
    ]

    def clean(text: str) -> str:
        return redact(text, secrets)

    artifacts = _fresh_artifacts(project_dir, args, started, record.get("invocation_id"))
    prefix = project_dir.relative_to(repo).as_posix() if repo else ""

    def repo_rel(path: str | None, unique_id: str = "") -> str | None:
        if not path:
            return None
        path = package_path(project_dir, name, unique_id, path)
        return f"{prefix}/{path}" if prefix not in ("", ".") else path

    common: dict[str, Any] = {
        "source": FailureSource.DBT,
        "pipeline_id": name,
        "run_id": record.get("invocation_id"),
        "repo_path": str(repo) if repo else None,
        "commit": commit,
        "repo_url": read_remote_url(repo) if repo else None,
        "dbt": invocation,
        "artifacts": artifacts,
        "log_location": str(project_dir / "logs" / "dbt.log"),
    }
    runtime = record.get("runtime")
    extra = {"dbt_runtime": runtime} if isinstance(runtime, str) else {}
    events: list[UniversalFailureEvent] = []
    for result in record.get("results", []):
        if str(result.get("status", "")).lower() not in FAILED_STATUSES:
            continue
        message = clean(str(result.get("message") or ""))
        is_test = str(result.get("unique_id", "")).startswith(("test.", "unit_test."))
        status = "fail" if is_test and result.get("status") == "fail" else "error"
        path = result.get("original_file_path")
        if status == "error" and str(result.get("unique_id", "")).startswith("unit_test."):
            path = tested_model_path(artifacts.get("manifest"), str(result["unique_id"])) or path
        context = {
            k: clean(result[k]) if isinstance(result[k], str) else result[k]
            for k in ("compiled_code", "relation_name", "failures", "resource_type", "name")
            if result.get(k) is not None
        } | extra
        events.append(
            UniversalFailureEvent(
                **common,
                unit_id=str(result.get("unique_id")),
                unit_path=repo_rel(path, str(result.get("unique_id"))),
                status=status,
                error_type="test_failure"
                if status == "fail"
                else _error_type(message, "Database Error"),
                error_message=message,
                log_excerpt=message[-2000:],
                context=context,
            )
        )
    exc = record.get("exception")
    if not events and exc and not record.get("usage_error"):
        message = clean(str(exc.get("message") or exc.get("text") or ""))
        text = clean(str(exc.get("text") or message))
        node = exc.get("node") or {}
        uid, path = node.get("unique_id"), node.get("original_file_path")
        if not uid and (m := _NODE_IN_MESSAGE.search(text)):
            uid, path = m.group("uid"), m.group("path")
        if not path and (m := _FILE_IN_MESSAGE.search(text)):
            path = m.group("path") or m.group("p2")
        if yaml_file := yaml_error_file(text, project_dir):
            uid, path = None, yaml_file  # a YAML error's unit is its file
        events.append(
            UniversalFailureEvent(
                **common,
                unit_id=uid or (f"file:{path}" if path else f"project.{name}"),
                unit_path=repo_rel(path),
                status="parse_error",
                error_type=_error_type(text, str(exc.get("type") or "Error")),
                error_message=message,
                traceback=clean(str(exc.get("traceback") or "")) or None,
                log_excerpt=text[-2000:],
                context=dict(extra),
            )
        )
    if uncommitted is not None:
        from patchit.intake.worktree_snapshot import CONTEXT_KEY

        events = [
            e.model_copy(update={"context": {**e.context, CONTEXT_KEY: uncommitted}})
            for e in events
        ]
    return events


def record_from_run_results(
    run_results: dict[str, Any], manifest: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A `run_results.json` (and its manifest) in the record shape `events_from_run` reads.

    For dbt runs patchit did not wrap (an Airflow BashOperator, Cosmos): the node fields the
    wrapper takes from dbt's objects come from the manifest instead.
    """
    manifest = as_dict(manifest)
    nodes = {**as_dict(manifest.get("nodes")), **as_dict(manifest.get("unit_tests"))}
    results = []
    for result in map(as_dict, as_list(as_dict(run_results).get("results"))):
        uid = str(result.get("unique_id", ""))
        node = as_dict(nodes.get(uid))
        failures = result.get("failures")
        results.append(
            {
                "unique_id": uid,
                "name": as_str(node.get("name")) or uid.rsplit(".", 1)[-1],
                "resource_type": as_str(node.get("resource_type")) or uid.split(".", 1)[0],
                "original_file_path": as_str(node.get("original_file_path")),
                "package_name": as_str(node.get("package_name")),
                "compiled_code": as_str(result.get("compiled_code"))
                or as_str(node.get("compiled_code")),
                "relation_name": as_str(result.get("relation_name"))
                or as_str(node.get("relation_name")),
                "status": str(result.get("status", "")),
                "message": as_str(result.get("message")),
                "failures": failures if isinstance(failures, int | float) else None,
            }
        )
    metadata = as_dict(as_dict(run_results).get("metadata"))
    return {
        "invocation_id": as_str(metadata.get("invocation_id")),
        "errors": [],
        "results": results,
        "exception": None,
        "duration_s": as_dict(run_results).get("elapsed_time"),
        "success": not any(str(r["status"]).lower() in FAILED_STATUSES for r in results),
    }
