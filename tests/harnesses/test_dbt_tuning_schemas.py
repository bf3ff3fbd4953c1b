"""`tuning_schemas`: dbt's JSON schemas made once per install, taken from a worker's file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

_SCHEMAS = """
import json, sys
from dbt.artifacts.resources import ModelConfig, SeedConfig
from patchit.harnesses.dbt import tuning_schemas as T
path, other = sys.argv[1], sys.argv[2]
dbt_s = ModelConfig.json_schema()  # dbt's own, before the tuning
T.install()
found = [T.load(path)]  # nothing there yet
T.make_common()
T._made["x.Unsaveable"] = {"not json": object()}  # made, but not JSON: never saved
T.save(path)
saved = json.load(open(path))
found.append(saved["schemas"]["dbt.artifacts.resources.v1.model.ModelConfig"] == dbt_s)
found.append("x.Unsaveable" in saved["schemas"])
# another process's file: its schemas are the ones answered
saved["schemas"]["dbt.artifacts.resources.v1.seed.SeedConfig"] = {"marked": True}
json.dump(saved, open(path, "w"))
T._made.clear()
found.append(T.load(path) > 5)
found.append(SeedConfig.json_schema() == {"marked": True})
# a file written under other versions is not read
saved["versions"]["dbt-core"] = "0.0.1"
json.dump(saved, open(other, "w"))
T._loaded.clear()
found.append(T.load(other))
found.append(SeedConfig.json_schema() != {"marked": True})
print(json.dumps(found))
"""


def test_a_worker_s_schemas_are_answered_and_another_install_s_are_not(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCHEMAS, str(tmp_path / "s.json"), str(tmp_path / "o.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        0, True, False, True, True, 0, True
    ]  # fmt: skip
