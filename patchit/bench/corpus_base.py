"""A scenario's base project as the scenario has it, and what a fixed branch must keep of it.

Two shapes of real projects the two base projects do not have: a profile whose DuckDB file
lives under dbt's target folder (`duckdb_path = "target/billing.duckdb"`: the user's dbt makes
`target/`, which a sandbox that moves dbt's target path does not), and files written with CRLF
line ends (`crlf = [paths]`: a Windows editor's YAML). The base project is copied with those
changes before its first commit. A fixed branch is then checked byte for byte: every line end
of those files is still CRLF, and a final newline is where it was.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from patchit.bench.corpus_env import copy_project
from patchit.bench.corpus_model import Scenario


def base_project(src: Path, work: Path, scenario: Scenario) -> Path:
    """`src` itself when the scenario changes nothing of it, else a changed copy in `work`."""
    if scenario.duckdb_path is None and not scenario.crlf:
        return src
    dest = copy_project(src, work / "base" / src.name)
    if scenario.duckdb_path is not None:
        _move_duckdb(dest / "profiles.yml", scenario.duckdb_path)
    for rel in scenario.crlf:
        file = dest / rel
        file.write_bytes(file.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    return dest


def _move_duckdb(profiles_file: Path, path: str) -> None:
    profiles = yaml.safe_load(profiles_file.read_text(encoding="utf-8"))
    for profile in profiles.values():
        for output in profile["outputs"].values():
            if output.get("type") == "duckdb":
                output["path"] = path
    profiles_file.write_text(yaml.safe_dump(profiles, sort_keys=False), encoding="utf-8")


def crlf_lost(checkout: Path, paths: list[str], broken: Path) -> list[str]:
    """The `paths` of `checkout` (a fixed branch) with a line end that is not CRLF (a bare
    LF), or a final newline added or dropped against `broken` (the broken commit's checkout)."""
    lost = []
    for rel in paths:
        file, was = checkout / rel, broken / rel
        data = file.read_bytes() if file.is_file() else b""
        ends = was.is_file() and was.read_bytes().endswith(b"\r\n")
        if not data or data.count(b"\n") != data.count(b"\r\n") or data.endswith(b"\n") != ends:
            lost.append(rel)
    return lost
