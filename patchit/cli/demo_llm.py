"""The model-tier part of `patchit demo --llm-replay`: a failure no fix-it knows, healed by
"the model" — the real `anthropic` client talking to a local replay server that serves a
scripted answer (these machines cannot reach the API)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.rule import Rule

from patchit.patching.llm.server import ReplayServer

SCRIPT = Path(__file__).resolve().parents[1] / "patching" / "llm" / "replays" / "demo.json"
MODEL = Path("models") / "marts" / "customers.sql"
GOOD = "        sum(amount) as lifetime_value\n"
BROKEN = "        sum(amount) as lifetime_value,\n        status as last_status\n"

Patchit = Callable[..., tuple[int, list[str]]]


def run_llm_demo(
    repo: Path,
    console: Console,
    patchit: Patchit,
    commit: Callable[[Path, str], None],
    dbt: list[str],
) -> int:
    """Break customers.sql with a GROUP BY error and heal it through the model tier.

    Returns how many requests reached the replay server.
    """
    console.print(Rule("[bold]3b. a failure no fix-it knows: the model tier (replayed)"))
    model = repo / MODEL
    model.write_text(model.read_text().replace(GOOD, BROKEN))
    commit(repo, "customers: keep each customer's last order status")
    console.print("  models/marts/customers.sql: + status as last_status (outside the aggregate)")
    with ReplayServer.from_file(SCRIPT) as server:
        env = {"ANTHROPIC_API_KEY": "replay-demo-key", "ANTHROPIC_BASE_URL": server.base_url}
        console.print(f"  ANTHROPIC_BASE_URL={server.base_url} (a local replay server)")
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            with console.status("patchit dbt -- build (tier 0 has nothing; the model answers) ..."):
                code, lines = patchit(*dbt)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        requests = len(server.requests)
    console.print(f"  dbt exited {code}; patchit said:")
    for line in lines:
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"  the replay server answered {requests} request(s)")
    return requests


def llm_lines(report: dict[str, Any]) -> str:
    llm = report.get("llm") or {}
    return (
        f"model tier: {llm.get('rounds', 0)} round(s), {llm.get('candidates', 0)} candidate(s), "
        f"{llm.get('tokens_in', 0)}+{llm.get('tokens_out', 0)} tokens, "
        f"${llm.get('cost_usd', 0.0):.4f}"
    )
