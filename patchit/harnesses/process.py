"""One command of a harness run (python, ci) in the sandbox, with a time limit.

The python and CI harnesses run user commands (pytest, a callable, a workflow's `run:` steps)
that can do anything: each runs through `patchit.sandbox.isolation` (writes only in the
worktree and the scratch dir, no network unless configured, a memory limit, an allowlisted
environment), in its own
process group so a timeout kills whatever it spawned, with its output in a scratch file (a
pipe could fill and block a chatty test suite).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchit.errors import HarnessError
from patchit.harnesses.warm import kill_process_group
from patchit.sandbox.isolation import Sandbox, allowed_env

OUTPUT_TAIL_CHARS = 12_000


@dataclass
class RunResult:
    """What one command did: its exit code, output tail and the limit it hit, if any."""

    returncode: int | None
    output: str
    duration_ms: int
    limit_hit: str | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.limit_hit is None


def tail(text: str, limit: int = OUTPUT_TAIL_CHARS) -> str:
    """The end of `text` (the error is at the end of a failing run's output)."""
    return text if len(text) <= limit else "...\n" + text[-limit:]


def run_sandboxed(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    sandbox: Sandbox,
    timeout_s: float,
    log_path: Path,
) -> RunResult:
    """Run `argv` under `sandbox`; a timeout kills its process group and is limit_hit="time"."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    timed_out = False
    with log_path.open("wb") as out:
        try:
            proc = subprocess.Popen(
                sandbox.wrap(list(argv)),
                cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=sandbox.preexec(),
            )  # fmt: skip
        except OSError as exc:
            raise HarnessError(
                f"cannot start {argv[0]!r} ({exc.strerror}); is it installed?"
            ) from exc
        try:
            returncode: int | None = proc.wait(timeout=max(timeout_s, 0.01))
        except subprocess.TimeoutExpired:
            kill_process_group(proc)
            returncode, timed_out = None, True
    output = log_path.read_text(encoding="utf-8", errors="replace")
    limit = "time" if timed_out else (sandbox.limit_in(output) if returncode != 0 else None)
    if timed_out:
        output += f"\npatchit: stopped after {timeout_s:g} s (the harness time limit)"
    return RunResult(
        returncode=returncode,
        output=tail(output),
        duration_ms=max(1, int((time.monotonic() - started) * 1000)),
        limit_hit=limit,
    )


def scrubbed_env(
    scratch: Path, extra: Mapping[str, str] | None = None, referenced: Iterable[str] = ()
) -> dict[str, str]:
    """The allowlisted part of the caller's environment (`allowed_env`: never the whole of it)
    plus the `referenced` variables the unit's code reads, with HOME and temp dirs moved into
    the scratch dir, so a tool writing caches or dotfiles writes them in the sandbox rather
    than in the user's home; `extra` is set as given."""
    env = allowed_env(os.environ, referenced=referenced)
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    env.update({"HOME": str(home), "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1"})
    for name in ("PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "VIRTUAL_ENV_PROMPT"):
        env.pop(name, None)
    if extra:
        env.update(extra)
    return env
