"""The tree shows the architecture: where a thing lives is found by `ls`, not by grep.

The top of `patchit/` holds only the package's face; everything else lives in the package of
its stage (`docs/concepts/loop.md`, "Where the code lives"). Each runtime's harness pieces are
together: a `dbt_*` or `airflow_*` file beside the harnesses belongs in `harnesses/dbt/` or
`harnesses/airflow/`. The same check from a shell:

    python -c "import pathlib; print(sorted(p.stem for p in pathlib.Path('patchit').glob('*.py')))"
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "patchit"

# the package's face: its entry, the exception tree, the settings' models, and the one loader
# of plugins (strategies and harnesses alike, built-in or third-party)
TOP_LEVEL = {"__init__", "__main__", "errors", "config", "plugins"}
RUNTIME_PREFIXES = ("dbt_", "airflow_")


def loose_modules(root: Path) -> list[str]:
    """The modules directly under `root` that are not the package's face."""
    return sorted(p.stem for p in root.glob("*.py") if p.stem not in TOP_LEVEL)


def loose_runtime_files(harnesses: Path) -> list[str]:
    """The harness modules named after a runtime that sit beside the harnesses, not in it."""
    return sorted(p.name for p in harnesses.glob("*.py") if p.stem.startswith(RUNTIME_PREFIXES))


def packages_without_docstring(root: Path) -> list[str]:
    """Packages whose `__init__.py` does not say what the package owns."""
    missing = []
    for init in sorted(root.rglob("__init__.py")):
        if "examples" in init.relative_to(root).parts:
            continue  # the demo's projects, shipped as data
        if not ast.get_docstring(ast.parse(init.read_text())):
            missing.append(str(init.parent.relative_to(root.parent)))
    return missing


def test_the_checks_see_a_loose_module(tmp_path: Path) -> None:
    root = tmp_path / "patchit"
    (root / "harnesses").mkdir(parents=True)
    for name in ("__init__.py", "config.py", "worker.py", "harnesses/__init__.py"):
        (root / name).write_text('"""A package."""\n')
    (root / "harnesses" / "dbt_units.py").write_text("")
    (root / "harnesses" / "airflow_home.py").write_text("")
    (root / "harnesses" / "base.py").write_text("")
    (root / "state").mkdir()
    (root / "state" / "__init__.py").write_text("X = 1\n")
    assert loose_modules(root) == ["worker"]
    assert loose_runtime_files(root / "harnesses") == ["airflow_home.py", "dbt_units.py"]
    assert packages_without_docstring(root) == ["patchit/state"]


def test_the_top_level_holds_only_the_face() -> None:
    loose = loose_modules(PACKAGE_ROOT)
    assert not loose, (
        f"modules directly under patchit/: {', '.join(loose)}; move each into the package of "
        "its stage (docs/concepts/loop.md, 'Where the code lives')"
    )


def test_each_runtime_harness_is_one_package() -> None:
    loose = loose_runtime_files(PACKAGE_ROOT / "harnesses")
    assert not loose, (
        f"runtime files loose in patchit/harnesses/: {', '.join(loose)}; "
        "they belong in harnesses/dbt/ or harnesses/airflow/"
    )


def test_every_package_says_what_it_owns() -> None:
    missing = packages_without_docstring(PACKAGE_ROOT)
    assert not missing, f"packages without a docstring in __init__.py: {', '.join(missing)}"


def test_the_harness_classes_keep_their_old_paths() -> None:
    """The entry points of the harness modules before their packages (`dbt = "<the dbt
    package>:DbtHarness"`) still load, and a module of the package does not load the harness
    with it. (The old paths are spelled in two pieces: the layout's rewrite script must not
    update them.)"""
    from importlib.metadata import EntryPoint

    from patchit.harnesses.airflow.harness import AirflowHarness
    from patchit.harnesses.dbt.harness import DbtHarness

    group = "patchit.harnesses"
    assert EntryPoint("dbt", group + ".dbt:DbtHarness", group).load() is DbtHarness
    assert EntryPoint("airflow", group + ".airflow:AirflowHarness", group).load() is AirflowHarness
    probe = (
        "import sys, patchit.harnesses.dbt.units, patchit.harnesses.airflow.home;"
        "print(sorted(m for m in sys.modules if m.endswith('.harness')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
