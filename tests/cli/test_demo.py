"""`make demo` is the first thing a user runs: `patchit demo` must end as it says it does
(two fixed incidents, the dbt one still fixed after the merge and the data failure that follows
it, and one escalated), with exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import seed_airflow_template

pytestmark = pytest.mark.slow


def test_the_demo_ends_as_it_says(tmp_path: Path) -> None:
    # patchit's Airflow template already migrated, as after a first heal (the demo's own
    # deployment still runs `airflow db migrate`)
    home = seed_airflow_template(tmp_path / "home")
    env = {**os.environ, "PATCHIT_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "demo", "--workdir", str(tmp_path / "work")],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    listed = subprocess.run(
        [sys.executable, "-m", "patchit", "incidents", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    ends = sorted((i["status"], i["classification"]) for i in json.loads(listed.stdout))
    assert ends == [("escalated", "data_issue"), ("fixed", "code_bug"), ("fixed", "code_bug")]
