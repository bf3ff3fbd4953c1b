"""Shared CLI plumbing: the state dir, the console, building a loop `Context`."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from patchit.config import load_config, resolve_home
from patchit.errors import HarnessError
from patchit.harnesses.registry import configure_harnesses, load_harnesses
from patchit.loop import Context
from patchit.memory import Memory
from patchit.patching.registry import load_strategies

# patchit's own lines go to stderr so that stdout stays dbt's output, byte for byte
console = Console(stderr=True, highlight=False)


def say(message: str) -> None:
    console.print(f"[bold cyan]patchit[/]: {message}", markup=True, soft_wrap=True)


def home_of(ctx: click.Context) -> Path:
    return resolve_home(ctx.obj.get("home") if ctx.obj else None)


def open_memory(home: Path) -> Memory:
    return Memory.open(home)


def make_context(home: Path, repo: Path | None) -> Context:
    config = load_config(repo)
    try:
        harnesses = load_harnesses()
    except HarnessError as exc:
        # classification and escalation must still work; verification will say why it can't
        say(f"no harness available: {exc}")
        harnesses = []
    configure_harnesses(harnesses, config)
    return Context(
        home=home,
        memory=open_memory(home),
        config=config,
        strategies=load_strategies(),
        harnesses=harnesses,
        say=say,
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
        say(f"report: {report}")
