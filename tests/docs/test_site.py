"""The docs site builds strictly, and its built pages hold every command and every setting.

Slow: a real `mkdocs build --strict` (about 15 s here), the same command `make docs` runs, into
a temporary directory. Strict mode turns mkdocs' warnings into a failed build: a link to a page
that does not exist, an anchor no page has, a page left out of the nav. A second build with one
broken link planted in a copy of the pages shows that the check fails when it should.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_docs import COMMANDS
from tests.conftest import ROOT
from tests.docs.reference_hook import load_hook

pytestmark = pytest.mark.slow


def build(site: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def ids(html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html))


def test_the_site_builds_strictly_with_every_command_and_setting(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = build(site)
    assert result.returncode == 0, result.stderr[-3000:]
    cli = ids((site / "reference" / "cli" / "index.html").read_text(encoding="utf-8"))
    missing = [path for path in COMMANDS if path.replace(" ", "-") not in cli]
    assert not missing, f"built commands reference lacks {missing}"
    settings = ids((site / "reference" / "settings" / "index.html").read_text(encoding="utf-8"))
    missing = [name for name in load_hook().setting_names() if name not in settings]
    assert not missing, f"built settings reference lacks {missing}"
    for page in ("getting-started/dbt-first-hour", "getting-started/airflow-first-hour",
                 "benchmarks/corpus-duckdb", "how-to/warehouses", "concepts/security"):  # fmt: skip
        assert (site / page / "index.html").is_file(), page


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "how-to" / "worker.md").open("a", encoding="utf-8") as fh:
        fh.write("\nSee [the queue](queue.md) and [the loop](../concepts/loop.md#no-such-part).\n")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = config.replace("docs_dir: docs", f"docs_dir: {docs}").replace(
        "  - docs/hooks/reference.py", f"  - {ROOT / 'docs' / 'hooks' / 'reference.py'}"
    )
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    result = build(tmp_path / "site", tmp_path / "mkdocs.yml")
    assert result.returncode != 0
    assert "'queue.md'" in result.stderr and "'#no-such-part'" in result.stderr, result.stderr
