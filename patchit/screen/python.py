"""The Python screen: every changed `.py` file compiled (`compile()`, nothing run).

It rejects a candidate that leaves a changed file unparsable: whatever imports that file
fails, and a fix that leaves a broken Python file behind is no fix. It judges with this
interpreter's grammar, so a harness whose runtime is another interpreter (a container's, a
`context["python"]` of the event) must not use it: a newer grammar (3.12's f-strings) could
be refused here and accepted there.
"""

from __future__ import annotations

import sys
import time
import traceback
import warnings
from pathlib import Path

from patchit.screen.model import Screening

CHECK = "compile() of the changed .py files"


def compile_python(root: Path, changed: list[str]) -> Screening:
    """Compile each changed `.py` file under `root` (repo-relative paths); the first
    SyntaxError rejects the candidate."""
    started = time.monotonic()
    screened: list[str] = []
    skipped: list[str] = []
    for rel in changed:
        if not rel.endswith(".py"):
            continue
        path = root / rel
        try:
            source = path.read_bytes()
        except OSError as exc:
            skipped.append(f"{rel}: unreadable ({exc.strerror or exc})")
            continue
        error = syntax_error(source, rel)
        screened.append(rel)
        if error is not None:
            return Screening(
                passed=False, check=CHECK, screened=screened, skipped=skipped,
                reason=error.splitlines()[-1], output=error, duration_ms=_ms(started),
            )  # fmt: skip
    return Screening(check=CHECK, screened=screened, skipped=skipped, duration_ms=_ms(started))


def compile_for(root: Path, changed: list[str], python: object = None) -> Screening:
    """`compile_python`, when the unit runs under this interpreter (`python`: the one the
    event names, if any); else nothing, since the grammars may differ."""
    if python and Path(str(python)).resolve() != Path(sys.executable).resolve():
        return Screening.nothing(f"the unit runs under {python}, not patchit's Python", CHECK)
    return compile_python(root, changed)


def syntax_error(source: bytes, filename: str) -> str | None:
    """The SyntaxError `compile()` raises on `source`, formatted as Python prints it, or None.

    patchit's own `from __future__` flags are not inherited, and warnings (an invalid escape
    sequence) are the runtime's business, not a rejection."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return "".join(traceback.format_exception_only(exc)).rstrip()
    except ValueError as exc:  # null bytes in the source
        return f'  File "{filename}"\nSyntaxError: {exc}'
    return None


def _ms(started: float) -> int:
    return max(1, int((time.monotonic() - started) * 1000))
