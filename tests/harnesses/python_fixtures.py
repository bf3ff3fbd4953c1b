"""A small Python project in a git repo (package, tests, CI workflow) and broken variants of it.

Its job writes `output/report.json` relative to the working directory, so a harness that ran
in the user's checkout instead of the worktree would leave a file there for the contract to see.
"""

from __future__ import annotations

from pathlib import Path

from patchit.events.model import UniversalFailureEvent
from tests.conftest import commit_all, git

JOBS = '''"""Jobs of the shop pipeline."""

import json
import time
from pathlib import Path

SETTINGS = {"currency": "EUR"}


def write_report(out_dir: str = "output") -> str:
    path = Path(out_dir) / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"currency": SETTINGS["currency"]}))
    return str(path)


def nap() -> None:
    time.sleep(3600)
'''

TESTS = """import json
from pathlib import Path

from shop.jobs import nap, write_report


def test_write_report():
    assert json.loads(Path(write_report()).read_text()) == {"currency": "EUR"}


def test_nap():
    nap()
"""

WORKFLOW = """name: CI
on: [push, pull_request]
env:
  REPORT_DIR: output
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: python -c "import shop.jobs"
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install
        run: echo "dependencies come with the runner"
      - name: Report
        run: |
          python -c "from shop.jobs import write_report as w; print(w('${{ env.REPORT_DIR }}'))"
      - name: Tests
        run: python -m pytest -q -p no:cacheprovider tests/test_jobs.py -k write_report
      - name: Upload on failure
        if: failure()
        run: echo "never run by patchit"
  slow:
    runs-on: ubuntu-latest
    steps:
      - run: python -c "from shop.jobs import nap; nap()"
"""


def make_python_repo(dest: Path, workflow: bool = True) -> Path:
    """A git repo (one commit): package `shop`, its tests, and a CI workflow."""
    (dest / "shop").mkdir(parents=True)
    (dest / "shop" / "__init__.py").write_text("")
    (dest / "shop" / "jobs.py").write_text(JOBS)
    (dest / "tests").mkdir()
    (dest / "tests" / "test_jobs.py").write_text(TESTS)
    if workflow:
        (dest / ".github" / "workflows").mkdir(parents=True)
        (dest / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    (dest / ".gitignore").write_text("__pycache__/\noutput/\n")
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "shop: jobs and tests")
    return dest


def break_settings(root: Path) -> str:
    """write_report reads a settings key that does not exist; returns the expected error."""
    jobs = root / "shop" / "jobs.py"
    jobs.write_text(jobs.read_text().replace('SETTINGS["currency"]', 'SETTINGS["curency"]'))
    commit_all(root, "jobs: typo")
    return "KeyError: 'curency'"


def python_event(
    repo: Path, unit_id: str, source: str = "python", **fields: object
) -> UniversalFailureEvent:
    return UniversalFailureEvent.model_validate(
        {
            "source": source,
            "pipeline_id": "shop",
            "unit_id": unit_id,
            "repo_path": str(repo),
            "commit": git(repo, "rev-parse", "HEAD"),
            **fields,
        }
    )
