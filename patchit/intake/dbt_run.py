"""Running dbt as the user asked: the part of the dbt intake the `patchit dbt` wrapper needs
before and while dbt runs. Import-light (standard library and YAML): a green run loads
nothing else; `patchit.intake.dbt` turns a failed run into events."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from patchit.errors import BadInputError
from patchit.intake.dbt_child_env import FAILED_FD_ENV, INVOCATION_ENV, SPOOL_ENV
from patchit.text.dbt_args import option_value


def check_dbt_installed() -> None:
    if importlib.util.find_spec("dbt") is None or importlib.util.find_spec("dbt.cli") is None:
        raise BadInputError(
            "dbt: not installed in patchit's environment; "
            "install it with `pip install 'patchit[dbt]'`"
        )


def resolve_project_dir(dbt_args: list[str], project_dir: str | None) -> Path:
    """The dbt project the invocation runs, validated before dbt starts."""
    given = option_value(dbt_args, "--project-dir")
    env = os.environ.get("DBT_PROJECT_DIR")
    if project_dir or given:
        source = "--project-dir"
    elif env:
        source = "DBT_PROJECT_DIR"
    else:
        source = "the current directory"
    path = Path(project_dir or given or env or ".").expanduser().resolve()
    if not path.is_dir():
        raise BadInputError(f"{source} {path}: does not exist; pass --project-dir of a dbt project")
    if not (path / "dbt_project.yml").is_file():
        raise BadInputError(
            f"{source} {path}: not a dbt project (no dbt_project.yml); "
            "pass --project-dir of a dbt project"
        )
    return path


def project_name(project_dir: Path) -> str:
    try:
        data = yaml.safe_load((project_dir / "dbt_project.yml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BadInputError(
            f"{project_dir / 'dbt_project.yml'}: unreadable YAML ({exc}); fix it"
        ) from exc
    if not isinstance(data, dict) or not data.get("name"):
        raise BadInputError(f"{project_dir / 'dbt_project.yml'}: has no `name:`; fix it")
    return str(data["name"])


def build_dbt_args(
    dbt_args: list[str], project_dir: Path, profiles_dir: str | None, target: str | None
) -> list[str]:
    args = list(dbt_args)
    if not args or args[0].startswith("-"):
        return args  # `dbt --version`, `dbt --help`: no sub-command takes the options
    if option_value(args, "--project-dir") is None:
        args += ["--project-dir", str(project_dir)]
    if profiles_dir and option_value(args, "--profiles-dir") is None:
        args += ["--profiles-dir", str(Path(profiles_dir).expanduser().resolve())]
    if target and option_value(args, "--target", "-t") is None:
        args += ["--target", target]
    return args


def run_dbt(
    args: list[str],
    work_dir: Path,
    invocation: list[str] | None = None,
    meanwhile: Callable[[], None] | None = None,
    on_error: Callable[[], None] | None = None,
    spool_ticket: str | None = None,
) -> tuple[int, dict[str, Any]]:
    """Run dbt in a child process; its output goes straight to our stdout/stderr.

    `invocation` is what the user typed after `dbt` (default `args`): dbt's artifacts record it.
    `meanwhile` is called once dbt has started (work to do while it runs, off its start).
    `on_error` is called, in this thread, as soon as a node errors, while dbt goes on with
    the rest of the build (work a heal needs that takes seconds to start).
    `spool_ticket` has dbt's process spool the failures as soon as dbt returns
    (`patchit.intake.dbt_spool`).
    """
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="dbt-run-", suffix=".json", dir=work_dir)
    except OSError as exc:
        raise BadInputError(
            f"{work_dir}: cannot create patchit's run directory ({exc.strerror or exc}); "
            "set PATCHIT_HOME to a writable directory"
        ) from exc
    os.close(fd)
    out = Path(name)
    out.unlink()
    try:
        # dbt records its own command line in run_results.json: the user's, not the child's
        env = {**os.environ, INVOCATION_ENV: json.dumps(list(invocation or args))}
        env.pop(SPOOL_ENV, None)
        if spool_ticket is not None:
            env[SPOOL_ENV] = spool_ticket
        told, tell = os.pipe() if on_error is not None else (-1, -1)
        if on_error is not None:
            env[FAILED_FD_ENV] = str(tell)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "patchit.intake.dbt_child", str(out), *args],
                env=env, pass_fds=(tell,) if tell >= 0 else (),
            )  # fmt: skip
        except BaseException:
            if told >= 0:
                os.close(told)
            raise
        finally:
            if tell >= 0:
                os.close(tell)  # the child holds it now: its exit ends the pipe
        with proc:
            try:
                if meanwhile is not None:
                    # work beside dbt must never stop dbt: what fails here is done after it
                    with contextlib.suppress(Exception):
                        meanwhile()
                if on_error is not None:
                    _await_error(proc, told, on_error)
                proc.communicate()  # as subprocess.run waits (a Ctrl-C gives dbt its moment)
            except BaseException:
                proc.kill()
                raise
            finally:
                if told >= 0:
                    os.close(told)
        record: dict[str, Any] = {}
        if out.is_file():
            record = json.loads(out.read_text(encoding="utf-8"))
        return proc.returncode, record
    finally:
        out.unlink(missing_ok=True)


def _await_error(proc: subprocess.Popen[bytes], told: int, on_error: Callable[[], None]) -> None:
    """Block until dbt says a node errored (then call `on_error`) or ends without saying so
    (its exit, even if something it started still holds the pipe). A Ctrl-C here, or while
    `on_error` runs, gives dbt its moment to stop, as `communicate()` does."""
    try:
        while proc.poll() is None:
            if not select.select([told], [], [], 0.2)[0]:
                continue
            if os.read(told, 64):
                with contextlib.suppress(Exception):  # never stops dbt: the heal starts it
                    on_error()
            return
    except KeyboardInterrupt:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(0.25)
        raise


def now_utc() -> datetime:
    return datetime.now(UTC)
