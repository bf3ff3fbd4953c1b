"""Breaking a copy of the example project, running real dbt, and turning what dbt said into
the Evidence a strategy sees. Shared by the strategy tests through session fixtures."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence, ProjectIndex, Relation
from patchit.patching.apply import apply_edits
from patchit.patching.base import PatchCandidate
from tests.conftest import run_dbt

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOG_PREFIX = re.compile(r"^\d\d:\d\d:\d\d\s+", re.MULTILINE)


@dataclass
class Broken:
    """A copy of the example project with some files changed, and what dbt said about it."""

    project: Path
    returncode: int
    output: str
    node_messages: dict[str, str] = field(default_factory=dict)

    def parse_error(self) -> str:
        """The text dbt printed after 'Encountered an error:' (parse-time failures)."""
        _, _, rest = self.output.partition("Encountered an error:\n")
        assert rest, self.output[-2000:]
        return rest.split("\nTraceback", 1)[0].split("\n\n", 1)[0].strip()


def copy_project(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("target", "logs"))
    return dest


def break_project(
    built: Path, dest: Path, changes: dict[str, tuple[str, str]], *dbt_args: str
) -> Broken:
    """Copy `built`, replace old -> new in each file (old '' writes a new file), run dbt."""
    project = copy_project(built, dest)
    for rel, (old, new) in changes.items():
        path = project / rel
        if old == "":
            path.write_text(new)
            continue
        text = path.read_text()
        assert text.count(old) == 1, (rel, old)
        path.write_text(text.replace(old, new))
    res = run_dbt(project, *dbt_args)
    output = _LOG_PREFIX.sub("", _ANSI.sub("", res.stdout + res.stderr))
    broken = Broken(project=project, returncode=res.returncode, output=output)
    results = project / "target" / "run_results.json"
    if results.exists() and "Encountered an error" not in output:
        for result in json.loads(results.read_text())["results"]:
            if result["status"] == "error":
                broken.node_messages[result["unique_id"]] = result["message"]
    return broken


def upstream_of(project: Path, model_path: str) -> list[Relation]:
    """The relations a model refs, with the columns they really have in the built database."""
    refs = re.findall(r"ref\('(\w+)'\)", (project / model_path).read_text())
    con = duckdb.connect(str(project / "shop.duckdb"), read_only=True)
    try:
        relations = []
        for name in refs:
            rows = con.execute(
                "select column_name from information_schema.columns where table_name = ? "
                "order by ordinal_position",
                [name],
            ).fetchall()
            relations.append(Relation(name=name, columns=[r[0] for r in rows]))
        return relations
    finally:
        con.close()


def make_evidence(
    project: Path,
    message: str,
    *,
    unit_id: str,
    unit_path: str | None,
    error_type: str,
    status: str = "error",
    upstream: list[Relation] | None = None,
    index: ProjectIndex | None = None,
) -> Evidence:
    """Evidence the way the dbt intake and evidence stage describe one failure."""
    event = UniversalFailureEvent(
        source=FailureSource.DBT,
        pipeline_id="shop",
        unit_id=unit_id,
        unit_path=unit_path,
        status=status,
        error_type=error_type,
        error_message=message,
        repo_path=str(project),
        dbt=DbtInvocation(command="build", project_dir=str(project), cwd=str(project)),
    )
    return Evidence(
        event=event,
        repo_root=str(project),
        project_dir="",
        unit_path=unit_path,
        raw_code=(project / unit_path).read_text() if unit_path else None,
        upstream=upstream or [],
        error=message,
        index=index or ProjectIndex(),
    )


def build_with(
    evidence: Evidence, candidate: PatchCandidate, dest: Path, select: str
) -> tuple[int, str]:
    """Apply the candidate to a fresh copy of the evidence repo and `dbt build` the node."""
    project = copy_project(Path(evidence.repo_root), dest)
    apply_edits(project, candidate.edits)
    res = run_dbt(project, "build", "--select", select)
    return res.returncode, res.stdout[-3000:]


def repo_evidence(repo: Path, path: str, message: str, unit_id: str) -> Evidence:
    """The Evidence of dbt node `unit_id` (file `path`) failing with `message` at the HEAD of
    the git repo `repo` (the dbt project at its root): what a strategy sees of a commit."""
    from tests.conftest import git

    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id=unit_id.split(".")[1], unit_id=unit_id,
        unit_path=path, status="error", error_type="Runtime Error", error_message=message,
        repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"),
        dbt=DbtInvocation(command="build", project_dir=str(repo), cwd=str(repo)),
    )  # fmt: skip
    return Evidence(event=event, repo_root=str(repo), project_dir="", unit_path=path,
                    error=message)  # fmt: skip
