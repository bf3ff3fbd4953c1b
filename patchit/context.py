"""The loop's `Context`: state dir, memory, config and plugins for healing one repository.

`build_context` is the one way the CLI and the worker make it: the repo's `.patchit.toml`,
every strategy and harness registered under patchit's entry points (a broken plugin is
skipped with a warning naming it), each harness configured with the repo's settings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from patchit.config import PatchitConfig, load_config
from patchit.harnesses.base import Harness
from patchit.harnesses.registry import configure_harnesses, load_harnesses
from patchit.liveness import claim_owner
from patchit.memory import Memory
from patchit.patching.base import Strategy
from patchit.patching.registry import load_strategies

Say = Callable[[str], None]
# A long step (a verification, the data check): says `message` as it starts; a terminal may show
# it with its elapsed time while it runs.
Step = Callable[[str], AbstractContextManager[None]]


def _quiet(_message: str) -> None:
    """The default `say`: a library call prints nothing unless asked."""


def default_owner() -> str:
    """Who holds an incident's lease: this host, process (pid and start time), boot and pid
    namespace (`patchit.liveness.claim_owner`)."""
    return claim_owner()


def say_step(say: Say) -> Step:
    """The plain Step: one line as the step starts (logs and pipes stay line-oriented)."""

    @contextmanager
    def step(message: str) -> Iterator[None]:
        say(message)
        yield

    return step


@dataclass
class Context:
    """What healing needs: state dir, memory, config and the plugins, with a voice."""

    home: Path
    memory: Memory
    config: PatchitConfig
    strategies: list[Strategy]
    harnesses: list[Harness]
    say: Say = field(default=_quiet)
    owner: str = field(default_factory=default_owner)
    step: Step | None = None  # None: a plain line through `say`

    def long_step(self, message: str) -> AbstractContextManager[None]:
        return (self.step or say_step(self.say))(message)

    def close(self) -> None:
        """Stop what the plugins started (warm runtimes, model sessions)."""
        for harness in self.harnesses:
            harness.close()
            for line in getattr(harness, "notices", ()):  # what it could not clean up
                self.say(line)
        for strategy in self.strategies:
            strategy.close()


def build_context(
    home: Path,
    repo: Path | None,
    *,
    memory: Memory | None = None,
    say: Say = _quiet,
    owner: str | None = None,
    step: Step | None = None,
) -> Context:
    """The context for healing `repo`'s failures, plugins loaded and configured."""
    config = load_config(repo)
    if memory is None:
        memory = Memory.open(home)
        for notice in memory.notices:
            say(notice)
    return Context(
        home=home,
        memory=memory,
        config=config,
        strategies=load_strategies(),
        harnesses=configure_harnesses(load_harnesses(), config),
        say=say,
        owner=owner or default_owner(),
        step=step,
    )
