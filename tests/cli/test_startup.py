"""Starting the CLI stays cheap: what `patchit --help` and the small commands import.

Wall-clock time is too noisy to assert on shared machines; the set of imported modules is
what makes the start slow, so that is what these tests pin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("patchit.loop.loop", "patchit.patching.llm", "anthropic", "dbt", "airflow")
# run in a fresh interpreter: the test process has imported everything already
PROBE = """
import json, sys
from click.testing import CliRunner
from patchit.cli.main import cli
result = CliRunner().invoke(cli, sys.argv[1:])
print(json.dumps({"exit_code": result.exit_code, "output": result.output,
                  "modules": sorted(sys.modules)}))
"""


def probe(*args: str, home: Path) -> tuple[int, str, set[str]]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PATCHIT_HOME": str(home)},
    )
    data = json.loads(out.stdout)
    return data["exit_code"], data["output"], set(data["modules"])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m in names or m.startswith(tuple(n + "." for n in names)))


def test_help_lists_every_command_without_importing_them(tmp_path: Path) -> None:
    code, output, modules = probe("--help", home=tmp_path)
    assert code == 0
    for name in ("airflow", "bench", "dbt", "demo", "heal", "incidents", "report", "worker"):
        assert f"  {name} " in output
    assert loaded(modules, HEAVY) == []
    assert not any(m.startswith("patchit.cli.") and m.endswith("_cmd") for m in modules)
    assert "pydantic" not in modules and "rich" not in modules


@pytest.mark.parametrize(
    "args",
    [("incidents",), ("incidents", "--json"), ("report", "20260101-abcdef"), ("schema",)],
    ids=lambda a: " ".join(a),
)
def test_small_commands_import_only_what_they_use(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, _, modules = probe(*args, home=tmp_path)
    assert code in (0, 1)  # report of an unknown incident is an error, still a cheap one
    assert loaded(modules, (*HEAVY, "patchit.cli.context", "rich", "jinja2")) == []


def test_a_subcommand_is_imported_when_its_help_is_asked(tmp_path: Path) -> None:
    code, output, modules = probe("airflow", "--help", home=tmp_path)
    assert code == 0 and "scan" in output
    assert "patchit.cli.airflow_cmd" in modules
    assert "patchit.cli.bench_cmd" not in modules


GREEN_PROBE = """
import json, sys
from datetime import UTC, datetime
from pathlib import Path
import patchit.cli.dbt_cmd
from patchit.worker.dbt_wrapper import DbtRun, heal_dbt_run
from patchit.memory.runlog import RunLog

home, repo = Path(sys.argv[1]), Path(sys.argv[2])
record = {"results": [{"unique_id": "model.shop.orders", "status": "success"}]}
run = DbtRun(0, record, ["build"], repo, repo, "c0ffee", datetime.now(UTC))
assert heal_dbt_run(run, home, RunLog(home), say=print) == []
print(json.dumps(sorted(sys.modules)))
"""


def test_a_green_dbt_run_loads_nothing_of_the_healing_machinery(tmp_path: Path) -> None:
    """What `patchit dbt -- build` runs on green: the command, the wrapper's policy and the
    memory's run log record the run; nothing of the loop, the harnesses, the console or
    sqlite-utils loads."""
    from patchit.memory import Memory
    from patchit.memory.outcomes import project_key_for

    home = tmp_path / "home"
    Memory.open(home).close()  # an existing memory: a first run creates it through the store
    out = subprocess.run(
        [sys.executable, "-c", GREEN_PROBE, str(home), str(tmp_path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    modules = set(json.loads(out.stdout))
    heavy = (*HEAVY, "patchit.harnesses", "patchit.loop.context", "patchit.sandbox.isolation",
             "patchit.events", "patchit.cli.context", "rich", "pydantic",
             "sqlite_utils")  # fmt: skip
    assert loaded(modules, heavy) == []
    assert "patchit.memory.store" not in modules and "patchit.intake.dbt" not in modules
    with Memory.open(home) as memory:
        assert memory.last_good(project_key_for(tmp_path, tmp_path)) == "c0ffee"
        [unit_run] = memory.unit_runs(str(tmp_path))
    assert (unit_run.unit_id, unit_run.commit, unit_run.passed) == (
        "model.shop.orders",
        "c0ffee",
        True,
    )


def test_a_green_run_creates_the_memory_when_there_is_none(tmp_path: Path) -> None:
    from patchit.memory import Memory
    from patchit.memory.runlog import RunLog, UnitRun
    from patchit.worker.dbt_wrapper import record_green

    home = tmp_path / "home"
    assert not RunLog(home).record_green([UnitRun("r", "model.a.b", "c0", True)], None)
    record_green(RunLog(home), [UnitRun("r", "model.a.b", "c1", True)], ("r::p", "c1"))
    assert RunLog(home).record_green([UnitRun("r", "model.a.b", "c2", False, "fp")], ("r::p", "c2"))
    with Memory.open(home) as memory:
        assert memory.last_good("r::p") == "c2"
        assert [(u.commit, u.passed, u.fingerprint) for u in memory.unit_runs("r")] == [
            ("c1", True, ""),
            ("c2", False, "fp"),
        ]
