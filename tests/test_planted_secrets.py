"""A distinct secret planted in every input; after a heal, no store holds any of them.

Inputs: the exception message (a `password=`, a GitHub token, an AWS key, a URL password), a
rendered template field (`PGPASSWORD=`, an `X-Api-Key` header), a task log line, a secret-named
environment variable, the dbt `--vars` and the dbt profile. Stores: the spool and the memory
(their SQLite files dumped row by row and read raw, WAL included; the memory's events.json
rows), the reports (.md, .json and .html), the repository's branches, and the request bodies the
model received (the local server speaking its API). This test drives the real callback, the
dbt intake and the loop with a fake harness; tests/test_planted_secrets_real.py runs real
Airflow and dbt through the command line.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from patchit.config import PatchitConfig
from patchit.harnesses.fake import FakeHarness
from patchit.intake.dbt import events_from_run
from patchit.intake.spool import Spool
from patchit.integrations.airflow import make_failure_callback
from patchit.loop.context import Context
from patchit.loop.loop import heal
from patchit.memory import Memory
from patchit.patching.llm.answers import CLASSIFY_TOOL
from patchit.patching.llm.server import RecordedRequest, ReplayServer
from patchit.patching.llm.strategy import LlmStrategy
from patchit.worker.worker import parse_spooled
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo

PLANTED = {
    "exception: password=": "msgpw-6cc1a9e2",
    "exception: GitHub token": "ghp_" + "Q7w3" * 9,
    "exception: AWS key": "AKIA" + "J7K2L9M4N8P3Q6R1",
    "exception: URL password": "urlpw-4e8d21b7",
    "rendered field: PGPASSWORD": "pgpw-91f0c3aa",
    "rendered field: X-Api-Key": "hdrkey-5b72e0d4",
    "log line": "logpw-0d3e9f61",
    "environment": "envtok-a83c55e9",
    "dbt --vars": "varstok-2f9b7c10",
    "dbt profile": "profpw-7d41e6b3",
}

JOB = "dags/totals.py"
BROKEN = 'row["amout"]'
RIGHT = 'row["amount"]'
# the task reads its secrets at run time, as real code does: none is in the repository
DAG = textwrap.dedent(
    """\
    import os


    def total(rows):
        env = os.environ
        if rows and "amout" not in rows[0]:
            raise KeyError(
                "amout: rows from https://etl:" + env["PLANTED_URL_PW"] + "@api.shop.test/rows"
                + " refused password=" + env["PLANTED_MSG_PW"] + " (token " + env["PLANTED_GH"]
                + ", key " + env["PLANTED_AWS"] + ", header " + env["SHOP_API_TOKEN"] + ")"
            )
        return sum(row["amout"] for row in rows)
    """
)
MODEL = "shop/models/orders.sql"
MODEL_SQL = "select order_id, amout from {{ ref('stg_orders') }}\n"


def store_texts(home: Path, repos: list[Path], requests: list[RecordedRequest]) -> dict[str, str]:
    """Every store as text: SQLite files row by row and raw (WAL too), reports, branches,
    and what the model was sent."""
    texts: dict[str, str] = {}
    for db in home.rglob("*.sqlite3"):
        conn = sqlite3.connect(db)
        texts[f"{db.name} rows"] = "\n".join(conn.iterdump())
        conn.close()
    for path in home.rglob("*"):
        if path.is_file() and (".sqlite3" in path.name or path.suffix in (".md", ".json", ".html")):
            texts[str(path.relative_to(home))] = path.read_bytes().decode("utf-8", "replace")
    for repo in repos:
        texts[f"git log of {repo.name}"] = git(repo, "log", "--all", "-p")
    texts["model requests"] = "\n".join(r.raw for r in requests)
    return texts


def leaks(texts: dict[str, str]) -> list[tuple[str, str]]:
    return [(label, store) for store, text in texts.items()
            for label, secret in PLANTED.items() if secret in text]  # fmt: skip


def model(body: dict[str, Any]) -> dict[str, Any]:
    """The model's answer to whichever tool it is asked for: code_bug, then the fix."""
    if body.get("tool_choice", {}).get("name") == CLASSIFY_TOOL:
        return {
            "tool_use": {"input": {"class": "code_bug", "reason": "typo", "evidence_quotes": []}}
        }
    dbt = "model.shop.orders" in json.dumps(body)
    path, search, replace = (MODEL, "amout", "amount") if dbt else (JOB, BROKEN, RIGHT)
    candidate = {
        "edits": [{"file": path, "search": search, "replace": replace}],
        "strategy_tag": "other",
        "rationale": "fix the key",
        "confidence": 0.9,
    }
    return {"tool_use": {"input": {"candidates": [candidate]}}}


class TI:
    dag_id = "totals_daily"
    task_id = "total"
    try_number = 1
    map_index = -1
    run_id = "scheduled__2026-11-25T00:00:00+00:00"

    def __init__(self, log_url: str) -> None:
        self.log_url = log_url


class Dag:
    dag_id = "totals_daily"

    def __init__(self, fileloc: Path) -> None:
        self.fileloc = str(fileloc)


class BashOperator:
    task_id = "total"
    template_fields = ("bash_command",)
    bash_command = (
        f"PGPASSWORD={PLANTED['rendered field: PGPASSWORD']} psql -h db -c 'select 1' && "
        f'curl -H "X-Api-Key: {PLANTED["rendered field: X-Api-Key"]}" https://api.shop.test/x'
    )


def failing_total(repo: Path) -> BaseException:
    """Run the DAG's code in this process, so the exception and its frames are real."""
    namespace: dict[str, Any] = {}
    exec(compile(DAG, str(repo / JOB), "exec", dont_inherit=True), namespace)
    try:
        namespace["total"]([{"amount": 3}])
    except KeyError as exc:
        return exc
    raise AssertionError("total did not fail")


@pytest.fixture
def planted_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's environment: secrets under plain names (the patterns must catch them) and
    one under a secret-named variable (masked as a literal value)."""
    monkeypatch.setenv("PLANTED_MSG_PW", PLANTED["exception: password="])
    monkeypatch.setenv("PLANTED_GH", PLANTED["exception: GitHub token"])
    monkeypatch.setenv("PLANTED_AWS", PLANTED["exception: AWS key"])
    monkeypatch.setenv("PLANTED_URL_PW", PLANTED["exception: URL password"])
    monkeypatch.setenv("SHOP_API_TOKEN", PLANTED["environment"])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")


def llm_context(home: Path, memory: Memory, server: ReplayServer, harness: FakeHarness) -> Context:
    config = PatchitConfig.model_validate(
        {"llm": {"enabled": True, "base_url": server.base_url, "max_retries": 0}}
    )
    return Context(home, memory, config, [LlmStrategy()], [harness])


def dbt_project(repo: Path) -> tuple[Path, Path]:
    project = repo / "shop"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    (repo / MODEL).write_text(MODEL_SQL)
    profiles = repo.parent / "profiles"
    profiles.mkdir()
    (profiles / "profiles.yml").write_text(
        "shop:\n  target: dev\n  outputs:\n"
        "    dev: {type: duckdb, path: shop.duckdb}\n"
        f"    prod: {{type: postgres, host: db, user: etl, password: {PLANTED['dbt profile']}}}\n"
    )
    return project, profiles


def test_no_store_holds_a_planted_secret(
    tmp_path: Path, _patchit_home: Path, planted_env: None
) -> None:
    home = _patchit_home
    repo = init_repo(tmp_path / "repo")
    (repo / JOB).parent.mkdir(parents=True)
    (repo / JOB).write_text(DAG)
    project, profiles = dbt_project(repo)
    sha = commit_all(repo, "totals DAG and the shop project")
    log = tmp_path / "logs" / "attempt=1.log"
    log.parent.mkdir()
    log.write_text(
        "[2026-11-25T00:00:01] INFO - starting\n"
        f"[2026-11-25T00:00:02] ERROR - connecting with password={PLANTED['log line']}\n"
    )

    # Airflow: the callback spools; the worker's parse reads the row back
    callback = make_failure_callback(home=home)
    callback({"ti": TI(str(log)), "dag": Dag(repo / JOB), "task": BashOperator(),
              "exception": failing_total(repo)})  # fmt: skip
    with Spool.open(home) as spool:
        [row] = spool.claim("test")
    airflow_event = parse_spooled(row)
    assert airflow_event.commit == sha and airflow_event.unit_path == JOB

    # dbt: what the wrapper makes of a failed run, with secrets in --vars and the profile
    vars_secret, profile_secret = PLANTED["dbt --vars"], PLANTED["dbt profile"]
    args = ["build", "--vars", json.dumps({"api_token": vars_secret}),
            "--project-dir", str(project), "--profiles-dir", str(profiles)]  # fmt: skip
    record = {
        "invocation_id": "inv-1",
        "results": [{
            "unique_id": "model.shop.orders", "status": "error",
            "original_file_path": "models/orders.sql",
            "message": 'Binder Error: Referenced column "amout" not found in FROM clause! '
                       f"(connected as {profile_secret}, token {vars_secret})",
            "compiled_code": f"select order_id, amout, '{vars_secret}' as t from stg_orders",
        }],
    }  # fmt: skip
    [dbt_event] = events_from_run(record, args, project, repo, sha, datetime.now(UTC))

    with Memory.open(home) as memory, ReplayServer([model] * 8) as server:
        for event, path, fix in ((airflow_event, JOB, RIGHT), (dbt_event, MODEL, "amount")):
            ctx = llm_context(home, memory, server, FakeHarness.passing_when(path, fix))
            try:
                outcome = heal(event, ctx)
            finally:
                ctx.close()
            assert outcome.incident.status == "fixed", outcome.incident.summary
        requests = list(server.requests)
    assert len(requests) >= 2  # the model was asked, and what it was sent is checked below

    texts = store_texts(home, [repo], requests)
    assert any(name.endswith(".html") for name in texts)
    assert any(name.endswith(".md") for name in texts) and any("spool" in n for n in texts)
    assert leaks(texts) == []
    # the evidence still reached the model, with the secrets masked in place
    sent = texts["model requests"]
    assert "password=***REDACTED***" in sent and "amout" in sent
