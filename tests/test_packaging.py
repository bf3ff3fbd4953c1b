"""Installing patchit prints no warning: `pip install -e .` (what `make install` runs) into a
throw-away environment, with setuptools from pyproject's build requirements, says nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def test_an_editable_install_prints_no_warning(tmp_path: Path) -> None:
    project = tmp_path / "project"  # a copy: the build writes egg-info next to the sources
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "patchit", project / "patchit",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install",
         "--quiet", "--no-deps", "-e", str(project)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # pip's own notes about unused index locations on this machine are not the project's
    said = [
        line for line in (proc.stdout + proc.stderr).splitlines()
        if line.strip() and "is ignored: it is neither a file nor a directory" not in line
    ]  # fmt: skip
    assert said == [], "\n".join(said)
    imported = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import patchit; print(patchit.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert imported.stdout.strip() == str(project / "patchit" / "__init__.py"), imported.stderr
