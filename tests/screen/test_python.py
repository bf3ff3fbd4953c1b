"""The Python screen: changed `.py` files compiled, nothing run."""

from __future__ import annotations

import sys
from pathlib import Path

from patchit.screen.python import compile_for, compile_python


def write(root: Path, rel: str, text: str) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return rel


def test_a_syntax_error_in_a_changed_file_rejects_with_pythons_own_message(
    tmp_path: Path,
) -> None:
    good = write(tmp_path, "dags/helpers.py", "def total(rows):\n    return sum(rows)\n")
    bad = write(tmp_path, "dags/etl.py", "rows = [1, 2\nprint(rows)\n")
    screening = compile_python(tmp_path, [good, bad, "models/x.sql"])
    assert not screening.passed
    assert screening.screened == [good, bad]
    assert screening.reason.startswith("SyntaxError:")
    assert 'File "dags/etl.py", line 1' in screening.output
    assert screening.duration_ms >= 1


def test_valid_files_pass_and_nothing_is_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    rel = write(tmp_path, "job.py", f"open({str(marker)!r}, 'w').write('x')\n")
    # an invalid escape is a warning for the runtime, not a rejection (and no error here)
    other = write(tmp_path, "pattern.py", 'PATTERN = "\\d+"\n')
    screening = compile_python(tmp_path, [rel, other])
    assert screening.passed, screening.reason
    assert screening.screened == [rel, other]
    assert not marker.exists()


def test_patchits_own_future_flags_are_not_inherited(tmp_path: Path) -> None:
    # `from __future__ import annotations` is on in this module: the user's file does not
    # have it, and must be judged as the runtime judges it
    rel = write(tmp_path, "late.py", "def f() -> UndefinedName: ...\nx = 1\n")
    assert compile_python(tmp_path, [rel]).passed


def test_unreadable_and_missing_files_are_not_judged(tmp_path: Path) -> None:
    screening = compile_python(tmp_path, ["gone.py"])
    assert screening.passed
    assert screening.screened == []
    assert screening.skipped and screening.skipped[0].startswith("gone.py: unreadable")


def test_another_interpreter_is_not_judged_with_this_grammar(tmp_path: Path) -> None:
    bad = write(tmp_path, "job.py", "def f(:\n")
    assert not compile_for(tmp_path, [bad], None).passed
    assert not compile_for(tmp_path, [bad], sys.executable).passed
    other = compile_for(tmp_path, [bad], "/opt/python3.13/bin/python")
    assert other.passed
    assert other.screened == []
    assert "not patchit's Python" in other.skipped[0]
