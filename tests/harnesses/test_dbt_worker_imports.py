"""The dbt worker's process imports only its own side: a fresh verification's process starts
without patchit's settings, events, evidence or sandbox code (the harness's side,
`worker_handle`), which cost it a quarter of a second before dbt was imported."""

from __future__ import annotations

import subprocess
import sys

PROBE = (
    "import sys; import patchit.harnesses.dbt.worker; "
    "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in "
    "('patchit', 'pydantic', 'ruamel', 'yaml', 'jinja2', 'dbt'))))"
)


def test_the_worker_s_process_imports_none_of_the_harness_s_side() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    loaded = set(done.stdout.split())
    assert "patchit.harnesses.dbt.worker" in loaded
    heavy = {"patchit.config", "patchit.events", "patchit.evidence", "pydantic", "ruamel",
             "yaml", "jinja2", "dbt", "patchit.sandbox.isolation",
             "patchit.harnesses.dbt.worker_handle", "patchit.harnesses.dbt.units"}  # fmt: skip
    assert loaded & heavy == set()
