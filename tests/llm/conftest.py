"""Fixtures of the LLM tier: a small repository, evidence built directly, a memory with an
incident, and configs pointing the real `anthropic` client at a ReplayServer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchit.config import LlmConfig
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.model import Evidence, Relation
from patchit.memory import Memory
from patchit.patching.llm.server import ReplayServer

API_KEY = "test-key-0123456789"
MODEL_PATH = "models/customers.sql"
MODEL_SQL = """with orders as (
    select customer_id, sum(amount) as total
    from {{ ref('stg_orders') }}
    group by customer_id
)

select
    c.customer_id,
    c.nme,
    o.total
from {{ ref('stg_customers') }} as c
left join orders as o using (customer_id)
"""
ERROR = (
    'Binder Error: Referenced column "nme" not found in FROM clause!\n'
    'Candidate bindings: "c.name", "c.customer_id"'
)
BREAKING_DIFF = """diff --git a/models/customers.sql b/models/customers.sql
--- a/models/customers.sql
+++ b/models/customers.sql
@@ -8,3 +8,3 @@
     c.customer_id,
-    c.name,
+    c.nme,
     o.total
"""


def make_event(repo: Path, **kw: Any) -> UniversalFailureEvent:
    data: dict[str, Any] = {
        "source": "dbt",
        "pipeline_id": "shop",
        "unit_id": "model.shop.customers",
        "unit_path": MODEL_PATH,
        "error_type": "Binder Error",
        "error_message": ERROR,
        "repo_path": str(repo),
    }
    return UniversalFailureEvent.model_validate({**data, **kw})


def make_evidence(repo: Path, **kw: Any) -> Evidence:
    data: dict[str, Any] = {
        "event": make_event(repo),
        "repo_root": str(repo),
        "unit_path": MODEL_PATH,
        "unit_name": "customers",
        "raw_code": MODEL_SQL,
        "compiled_code": MODEL_SQL.replace("{{ ref('stg_customers') }}", '"main"."stg_customers"'),
        "error": ERROR,
        "breaking_diff": BREAKING_DIFF,
        "upstream": [
            Relation(name="stg_customers", columns=["customer_id", "name", "signup_date"]),
            Relation(name="stg_orders", columns=["order_id", "customer_id", "amount"]),
        ],
        "properties": {"models/schema.yml": "version: 2\nmodels:\n  - name: customers\n"},
        "tests": ["not_null_customers_customer_id"],
        "git_log": ["abc1234 2026-01-05 Dana Engineer customers: rename name"],
        "changed_files": [MODEL_PATH],
    }
    data.update(kw)
    return Evidence.model_validate(data)


def answer(*candidates: dict[str, Any], usage: tuple[int, int] = (1000, 200)) -> dict[str, Any]:
    """A replay step: a tool_use answer holding `candidates`."""
    return {
        "tool_use": {"input": {"candidates": list(candidates)}},
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def cand(
    search: str,
    replace: str,
    *,
    file: str = MODEL_PATH,
    tag: str = "rename_column",
    confidence: float = 0.9,
) -> dict[str, Any]:
    return {
        "edits": [{"file": file, "search": search, "replace": replace}],
        "strategy_tag": tag,
        "rationale": "the column is called name upstream",
        "confidence": confidence,
    }


def llm_config(server: ReplayServer | None = None, **kw: Any) -> LlmConfig:
    data: dict[str, Any] = {"enabled": True, "max_retries": 0, "timeout_s": 10}
    if server is not None:
        data["base_url"] = server.base_url
    return LlmConfig.model_validate({**data, **kw})


def user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "models").mkdir(parents=True)
    (root / MODEL_PATH).write_text(MODEL_SQL)
    (root / "models" / "schema.yml").write_text("version: 2\nmodels:\n  - name: customers\n")
    return root


@pytest.fixture
def evidence(repo: Path) -> Evidence:
    return make_evidence(repo)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    return API_KEY


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    mem = Memory.open(tmp_path / "home")
    yield mem
    mem.close()


@pytest.fixture
def incident_id(memory: Memory, repo: Path) -> str:
    return memory.create_incident(make_event(repo), "fp-customers", "cause-customers").id
