"""A failing `dbt build` of the example project, run once per test run and copied per test.

Several loop tests start from the same failure: the shop repo (as the `shop_repo` fixture
makes it) with one commit breaking a model, built by the user's `dbt build` through patchit's
intake (`user_dbt_events`). That build gives the same result every time and costs some 7
CPU-s and 10-30 s on a loaded machine; a dozen tests each ran it. Now the first test to ask
runs it (under `shared_build`'s lock, so one pytest-xdist worker does) and every test gets a
byte copy of what it left: the repo with its `.git` (the same commits), the DuckDB file and
dbt's `target/` as the failing build wrote them, the intake's run records, and the events,
their paths pointed at the copy. The heal, its verification and its memory then run for real
on the copy, as they did on a repo of the test's own.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from tests.conftest import commit_all, git, shared_build, user_dbt_events


def failed_build(
    factory: pytest.TempPathFactory,
    built_shop: Path,
    repo: Path,
    name: str,
    breaks: Callable[[Path], None],
) -> tuple[int, list[UniversalFailureEvent]]:
    """Make `repo` (a test's `shop_repo`, replaced) the shop after `breaks(repo)` committed its
    change and `dbt build` failed on it; dbt's exit code and the failure events. `name` keys
    the run's one build: one name, one `breaks`."""

    def build(root: Path) -> None:
        shop = root / "shop"
        shutil.copytree(built_shop, shop)
        (shop / ".gitignore").write_text(
            "target/\nlogs/\n*.duckdb\n*.duckdb.wal\ndbt_packages/\n"
        )  # as the `shop_repo` fixture writes it
        git(shop, "init", "-q", "-b", "main")
        commit_all(shop, "shop: initial models")
        breaks(shop)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PATCHIT_HOME", str(root / "patchit-home"))
            code, events = user_dbt_events(shop, ["build"])
        saved = {"root": str(root), "code": code,
                 "events": [e.model_dump(mode="json") for e in events]}  # fmt: skip
        (root / "events.json").write_text(json.dumps(saved))

    root = shared_build(factory, f"failed-{name}", build)
    assert repo.name == "shop", repo  # the copy sits where the build ran: <dir>/shop, <dir>/runs
    shutil.rmtree(repo)
    shutil.copytree(root / "shop", repo, symlinks=True)
    if (root / "runs").is_dir():
        shutil.copytree(root / "runs", repo.parent / "runs", symlinks=True)
    saved = json.loads((root / "events.json").read_text())
    moved = json.loads(json.dumps(saved["events"]).replace(saved["root"], str(repo.parent)))
    return saved["code"], [UniversalFailureEvent.model_validate(e) for e in moved]
