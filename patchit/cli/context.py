"""Shared CLI plumbing: the state dir, the console, building a loop `Context`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape

from patchit.config import resolve_home

if TYPE_CHECKING:  # imported where used: `patchit --help` must not load the loop
    from patchit.loop.context import Context
    from patchit.loop.loop import HealOutcome
    from patchit.memory import Memory

# patchit's own lines go to stderr so that stdout stays dbt's output, byte for byte; never
# hard-wrapped (a log or CI page wraps for itself; a line cut at 80 columns breaks greps)
console = Console(stderr=True, highlight=False, soft_wrap=True)


def say(message: str) -> None:
    console.print(f"[bold cyan]patchit[/]: {message}", markup=True, soft_wrap=True)


def say_text(message: str) -> None:
    """`say` for text that is not markup (paths, errors, `[repos]` in a hint): shown as is."""
    say(escape(message))


@contextmanager
def step(message: str) -> Iterator[None]:
    """A long step: in a terminal, a live status with its elapsed time, then one line with the
    time it took; elsewhere (logs, pipes, CI) just the line as it starts."""
    if not console.is_terminal:
        say(message)
        yield
        return
    started = time.monotonic()

    def text() -> str:
        elapsed = time.monotonic() - started
        return f"[bold cyan]patchit[/]: {message.strip()} [dim]({elapsed:.0f} s)[/]"

    done = threading.Event()
    with console.status(text()) as status:

        def tick() -> None:
            while not done.wait(0.5):
                status.update(text())

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()
    say(f"{message} [dim]({time.monotonic() - started:.1f} s)[/]")


def home_of(ctx: click.Context) -> Path:
    return resolve_home(ctx.obj.get("home") if ctx.obj else None)


def open_memory(home: Path) -> Memory:
    from patchit.memory import Memory

    return Memory.open(home)


def make_context(home: Path, repo: Path | None) -> Context:
    """The loop's context for `repo`, speaking through `say_text` (what the loop says is
    text: `[delivery] mode` is a setting's name, not markup)."""
    from patchit.loop.context import build_context

    return build_context(home, repo, say=say_text, step=step)


def print_healed(outcome: HealOutcome) -> None:
    incident = outcome.incident
    print_outcome(
        incident.id, incident.status, incident.branch, incident.report_md, outcome.commands
    )


def print_outcome(
    incident_id: str, status: str, branch: str | None, report: str | None, commands: list[str]
) -> None:
    say(f"incident {incident_id}: [bold]{status}[/]")
    if branch:
        say(
            f"verified fix on branch [bold green]{branch}[/]"
            + ("; look at it and run it with:" if commands else "")
        )
        for command in commands:
            console.print(f"    {command}", markup=False, soft_wrap=True)
    if report:
        html = Path(report).with_suffix(".html")
        say(f"report: {report}" + (f" (HTML: {html})" if html.is_file() else ""))
