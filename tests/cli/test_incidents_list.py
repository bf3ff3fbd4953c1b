"""`patchit incidents`: a repository column, summaries that wrap instead of being cut, open
incidents that say what they are waiting for, and --status / --repo / --since filters."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from patchit.cli.incidents_view import parse_since, table
from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.memory import Memory
from patchit.memory.records import recorded_only_summary
from tests.cli.helpers import patchit

LONG = ("the column amout does not exist in stg_orders; the breaking change renamed it to "
        "amount in the staging model and the mart still reads the old name, so every run of "
        "daily_revenue fails until the mart follows")  # fmt: skip


def seed(home: Path) -> dict[str, str]:
    made = {}
    with Memory.open(home) as memory:
        for name, repo, trigger in (("a", "/srv/shop", "fixed"), ("b", "/srv/zoo", "escalated"),
                                    ("c", "/srv/shop", None)):  # fmt: skip
            event = UniversalFailureEvent.model_validate(
                {"source": "dbt", "pipeline_id": "shop", "unit_id": f"model.shop.{name}",
                 "error_type": "E", "error_message": name, "repo_path": repo}
            )  # fmt: skip
            incident = memory.create_incident(event, f"fp-{name}", f"ck-{name}")
            if trigger:
                memory.transition(incident.id, trigger, summary=LONG if name == "a" else "dupes")
            made[name] = incident.id
        old = (datetime.now(UTC) - timedelta(days=10)).isoformat()
        memory.db.execute("update incidents set updated_utc = ? where id = ?", [old, made["b"]])
    return made


def listed(*args: str) -> list[str]:
    res = patchit("incidents", "--json", *args)
    assert res.returncode == 0, res.stderr
    return [row["id"] for row in json.loads(res.stdout)]


def test_filters(_patchit_home: Path) -> None:
    made = seed(_patchit_home)
    assert set(listed()) == set(made.values())
    assert listed("--status", "fixed") == [made["a"]]
    assert set(listed("--status", "open", "--status", "escalated")) == {made["b"], made["c"]}
    assert set(listed("--repo", "/srv/shop")) == {made["a"], made["c"]}
    assert made["b"] not in listed("--since", "7d")
    assert made["b"] in listed("--since", "2000-01-01")
    bad = patchit("incidents", "--since", "last tuesday")
    assert bad.returncode == 2 and "--since 'last tuesday'" in bad.stderr


def test_the_table_wraps_and_names_the_repository(_patchit_home: Path) -> None:
    made = seed(_patchit_home)
    res = patchit("incidents")
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "repository" in text.splitlines()[0]
    assert " shop " in text and " zoo " in text
    words = " ".join(line.strip() for line in text.splitlines()[1:] if line.startswith("    "))
    assert LONG in words  # every word of it, over several lines
    assert f"`patchit heal {made['c']}` resumes it" in text  # an open incident says why


def test_table_width_and_since_parsing() -> None:
    row = {"id": "20261126-000000", "status": "failed", "classification": "code_bug",
           "repo_path": "/srv/shop", "attempts": 2, "tokens": 0, "cost_usd": 0.0,
           "branch": None, "pr_url": None, "pr_state": None, "summary": LONG}  # fmt: skip
    lines = table([row], set(), width=60)
    assert all(len(line) <= 60 for line in lines[2:])
    assert " ".join(line.strip() for line in lines[2:]) == LONG
    now = datetime(2026, 11, 26, 12, tzinfo=UTC)
    assert parse_since("24h", now) == now - timedelta(hours=24)
    assert parse_since("2026-11-20", now) == datetime(2026, 11, 20, tzinfo=UTC)
    with pytest.raises(BadInputError, match="--since"):
        parse_since("soon", now)


def test_a_record_only_incident_says_so_until_a_heal_takes_it() -> None:
    recorded = recorded_only_summary("20261126-000001", "--no-heal was given")
    row = {"id": "20261126-000001", "status": "open", "classification": None,
           "repo_path": "/srv/shop", "attempts": 0, "tokens": 0, "cost_usd": 0.0,
           "branch": None, "pr_url": None, "pr_state": None, "summary": recorded}  # fmt: skip
    text = " ".join(" ".join(line.split()) for line in table([row], set(), width=200)[1:])
    assert text == (
        "20261126-000001 open - shop 0 0 $0.0000 - - recorded, not healed (--no-heal was "
        "given): `patchit heal 20261126-000001` heals it"
    )
    assert "stopped before it finished" not in text
    healing = table([row], {"20261126-000001"}, width=200)
    assert healing[-1].strip() == "being healed now"
