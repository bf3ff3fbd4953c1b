"""Compare an Airflow task's outputs between baseline and candidate runs.

The outputs are what `patchit.harnesses.airflow.runner` records: every XCom of the run (the task's
return value is its `return_value` XCom) and every file created or changed under the worktree and
the scratch dir, each as a hash of its content with sandbox paths normalised. An output that two
baseline runs disagree on is unstable and left out.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from patchit.fidelity.meant import Meant
from patchit.fidelity.model import OutputDiff


def _outputs(result: dict[str, Any]) -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for kind, field in (("xcom", "xcom"), ("file", "files")):
        for name, digest in (result.get(field) or {}).items():
            found[(kind, str(name))] = str(digest)
    return found


def differing(a: dict[str, Any], b: dict[str, Any]) -> set[tuple[str, str]]:
    """Outputs present in only one run, or with different content."""
    left, right = _outputs(a), _outputs(b)
    return {key for key in left.keys() | right.keys() if left.get(key) != right.get(key)}


def is_meant(kind: str, name: str, meant: Meant) -> bool:
    """The rule of `meant`: a kept `return` line for return values, else the name itself."""
    if kind == "xcom":
        key = name.rsplit(".", 1)[-1]
        return meant.returns_changed() if key == "return_value" else meant.names_anywhere(key)
    return meant.names_anywhere(PurePosixPath(name).name)


def _short(kind: str, name: str) -> str:
    """What the code names an output by: an XCom's key, a file's name."""
    return name.rsplit(".", 1)[-1] if kind == "xcom" else PurePosixPath(name).name


def _preview(result: dict[str, Any], kind: str, name: str) -> str:
    field = "xcom_text" if kind == "xcom" else "files_head"
    if name not in (result.get("xcom" if kind == "xcom" else "files") or {}):
        return "(absent)"
    return str((result.get(field) or {}).get(name, ""))


def compare_outputs(
    base: dict[str, Any],
    cand: dict[str, Any],
    unstable: set[tuple[str, str]],
    meant: Meant,
) -> list[OutputDiff]:
    """One OutputDiff per output of either run, with its verdict."""
    left, right = _outputs(base), _outputs(cand)
    diffs: list[OutputDiff] = []
    for kind, name in sorted(left.keys() | right.keys()):
        label = "value" if kind == "xcom" else "content"
        out = OutputDiff(kind="xcom" if kind == "xcom" else "file", name=name)
        if (kind, name) not in left:
            out.missing_in = "baseline"
        elif (kind, name) not in right:
            out.missing_in = "candidate"
        if left.get((kind, name)) != right.get((kind, name)):
            out.differing = [label]
            if (kind, name) in unstable:
                out.unstable, out.verdict = [label], "unstable"
            elif is_meant(kind, name, meant) or (
                out.missing_in == "baseline" and meant.carried_forward(_short(kind, name))
            ):
                out.meant, out.verdict = [label], "meant"
            else:
                out.unexpected, out.verdict = [label], "unexpected"
                out.sample = (
                    f"baseline:  {_preview(base, kind, name)}\n"
                    f"candidate: {_preview(cand, kind, name)}"
                )
        diffs.append(out)
    return diffs
