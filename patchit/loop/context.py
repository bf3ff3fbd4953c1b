"""The loop's `Context`: state dir, memory, config and plugins for healing one repository.

`build_context` is the one way the CLI and the worker make it: the operator's settings
(`$PATCHIT_HOME/patchit.toml`; `judged_by` narrows them by the repository's `.patchit.toml` for
each failure, see `patchit.policy.settings`), every strategy and harness registered under patchit's
entry points (a broken plugin is skipped with a warning naming it), each harness configured
with those settings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.gitlog import last_good_on_line
from patchit.harnesses.base import Harness
from patchit.harnesses.registry import configure_harnesses, load_harnesses
from patchit.memory import Memory
from patchit.patching.base import Strategy
from patchit.patching.registry import load_strategies
from patchit.policy.settings import narrow_for, operator_config, project_key
from patchit.state.liveness import claim_owner

Say = Callable[[str], None]
# A long step (a verification, the data check): says `message` as it starts; a terminal may show
# it with its elapsed time while it runs.
Step = Callable[[str], AbstractContextManager[None]]


def _quiet(_message: str) -> None:
    """The default `say`: a library call prints nothing unless asked."""


def default_owner() -> str:
    """Who holds an incident's lease: this host, process (pid and start time), boot and pid
    namespace (`patchit.state.liveness.claim_owner`)."""
    return claim_owner()


def say_step(say: Say) -> Step:
    """The plain Step: one line as the step starts (logs and pipes stay line-oriented)."""

    @contextmanager
    def step(message: str) -> Iterator[None]:
        say(message)
        yield

    return step


def remembered_last_good(memory: Memory, event: UniversalFailureEvent) -> str | None:
    """Memory's last good commit of `event`'s project when the failing commit descends from
    it, else None: a green run on another branch says nothing about this line
    (`evidence.gitlog.last_good_on_line`). Every caller but the evidence (which also says in
    the report what it set aside) takes it from here."""
    remembered = memory.last_good(project_key(event))
    if not remembered or not event.repo_path:
        return remembered
    return last_good_on_line(Path(event.repo_path), remembered, event.commit or "HEAD")


@dataclass
class Context:
    """What healing needs: state dir, memory, config and the plugins, with a voice. `config`
    is the operator's settings until `judged_by` narrows it for one failure."""

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

    def last_good(self, event: UniversalFailureEvent) -> str | None:
        """`remembered_last_good` in this context's memory."""
        return remembered_last_good(self.memory, event)

    def judged_by(self, event: UniversalFailureEvent) -> Context:
        """This context under the rules `event`'s failure is judged by: the repository's
        `.patchit.toml` at the project's last good commit on the failing commit's line (else
        the failing commit's parent) merged in where it may narrow `config`; each setting
        refused is said."""
        settings = narrow_for(self.config, event, self.last_good(event))
        for line in settings.refused:
            self.say(line)
        if settings.config == self.config:
            return self
        configure_harnesses(self.harnesses, settings.config)
        return replace(self, config=settings.config)

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
    """The context for healing `repo`'s failures, plugins loaded and configured with the
    operator's settings (`repo`'s own are read per failure: `Context.judged_by`)."""
    del repo  # kept in the signature: callers name the repository a context is for
    config = operator_config(home)
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
