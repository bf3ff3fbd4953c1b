"""What the fuzz tests share: how many inputs, a hang guard, a tally per parser, hostile inputs.

`PATCHIT_FUZZ_EXAMPLES` sets how many inputs each parser gets (`make fuzz`: 10,000); without
it each fuzz test runs its own small default so `make test` stays fast (and derandomized, so
CI is repeatable). A parser call that raises anything but its documented error is a
traceback; one that uses more than `PATCHIT_FUZZ_HANG_S` (10 s) of CPU, or six times that of
wall time, is a hang. Both are collected rather than raised at once, so a run reports how many
of its inputs went wrong, and the test fails at the end if any did. `make fuzz` prints the tallies.
"""

from __future__ import annotations

import os
import signal
import string
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

EXAMPLES_ENV = "PATCHIT_FUZZ_EXAMPLES"
HANG_S = float(os.environ.get("PATCHIT_FUZZ_HANG_S", "10"))
WALL_FACTOR = 6  # a call blocked (not computing) this many times HANG_S is a hang too
T = TypeVar("T")


def fuzz_examples(default: int) -> int:
    """The number of inputs per parser: `PATCHIT_FUZZ_EXAMPLES`, else the test's default."""
    raw = os.environ.get(EXAMPLES_ENV)
    return int(raw) if raw else default


def fuzz_settings(examples: int = 100) -> settings:
    return settings(
        max_examples=fuzz_examples(examples),
        deadline=None,  # the hang guard below measures each call instead
        database=None,  # no .hypothesis directory in the checkout
        derandomize=EXAMPLES_ENV not in os.environ,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],  # tallied, not raised: nothing to shrink
    )


class Hang(Exception):
    """A parser call ran longer than HANG_S."""


@contextmanager
def hang_guard(seconds: float = HANG_S) -> Iterator[None]:
    """Raise Hang in the main thread once the call used `seconds` of CPU, or waited
    `WALL_FACTOR` times that (a blocked call); regular expressions check signals too. CPU,
    not the clock: on a shared machine (or under `nice`) a call that needs 0.2 s of CPU can
    take a minute of wall time, and that is no hang."""

    def alarm(_signum: int, _frame: object) -> None:
        raise Hang(f"still running after {seconds:g} s of CPU or {seconds * WALL_FACTOR:g} s")

    previous = {sig: signal.signal(sig, alarm) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class Tally:
    """Inputs one parser was given, and the tracebacks and hangs among them."""

    parser: str
    inputs: int = 0
    refused: int = 0
    tracebacks: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)

    def run(
        self,
        call: Callable[[], T],
        refusals: tuple[type[BaseException], ...] = (),
        shown: object = None,
    ) -> T | None:
        """`call()`, counted; a documented refusal returns None, anything else is recorded."""
        self.inputs += 1
        try:
            with hang_guard():
                return call()
        except Hang:
            self.hangs.append(_short(shown))
        except refusals:
            self.refused += 1
        except Exception as exc:
            frames = traceback.format_tb(exc.__traceback__)[-4:]
            error = _short(f"{type(exc).__name__}: {exc}")
            self.tracebacks.append(f"{_short(shown)}\n{''.join(frames)}{error}")
        return None

    def check(self, reason: str, ok: bool, shown: object = None) -> None:
        """Record a broken promise (a second line in an error, a secret kept) as a traceback."""
        if not ok:
            self.tracebacks.append(f"{_short(shown)}\n{reason}")

    def assert_clean(self) -> None:
        problems = [*self.tracebacks[:3], *(f"hang: {h}" for h in self.hangs[:3])]
        assert not self.tracebacks and not self.hangs, (
            f"{self.parser}: {len(self.tracebacks)} traceback(s), {len(self.hangs)} hang(s) in "
            f"{self.inputs} inputs:\n" + "\n---\n".join(problems)
        )


TALLIES: dict[str, Tally] = {}


def tally(parser: str) -> Tally:
    """The tally of one parser for this process (tests of the same parser add up)."""
    return TALLIES.setdefault(parser, Tally(parser))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 300 else f"{text[:150]}...{text[-150:]}"


def summary_lines() -> list[str]:
    lines = [f"{'parser':<28} {'inputs':>8} {'refused':>8} {'tracebacks':>10} {'hangs':>6}"]
    for t in sorted(TALLIES.values(), key=lambda t: t.parser):
        lines.append(
            f"{t.parser:<28} {t.inputs:>8} {t.refused:>8} {len(t.tracebacks):>10} {len(t.hangs):>6}"
        )
    total = list(TALLIES.values())
    lines.append(
        f"{'total':<28} {sum(t.inputs for t in total):>8} {sum(t.refused for t in total):>8} "
        f"{sum(len(t.tracebacks) for t in total):>10} {sum(len(t.hangs) for t in total):>6}"
    )
    return lines


# -- hostile inputs ---------------------------------------------------------------------------

# What the parsers look for: a piece of each, repeated, is where a backtracking pattern or a
# recursive walk goes superlinear.
SEEDS = [
    "", " ", "\n", "\t", "\r\n", "\x00", "\ud800", "\udce9", "é", "\\", '"', "'", ":", "=", "@",
    "/", "://", "a://b:c@", "{", "[", "]", "}", "(", ")", "#", "-", "_", ".", "0", "9" * 50,
    "password=", "password: ", "token:", "X-Api-Key: ", "Authorization: Bearer ", "--password ",
    "-----BEGIN PRIVATE KEY-----", "eyJ", "sk-ant-", "ghp_", "AKIA", "DBT_ENV_SECRET_",
    "Traceback (most recent call last):\n", '  File "/repo/dags/x.py", line 1, in f\n',
    '  File "', ", line ", ", in ", '  File "/repo/x.py", line ', "    ", "    x = 1\n",
    "KeyError: 'a'\n",
    "During handling of the above exception", "ERROR ", "Error: ", "CRITICAL",
    "Binder Error: ", "Candidate bindings: ", "Did you mean ", "model.shop.orders",
    "ref('orders')", "{{ ", " }}", "select ", "/tmp/", "0x7f", "2026-11-25T01:00:00",
]  # fmt: skip

_chars = st.characters(blacklist_categories=())  # surrogates included
plain_text = st.text(_chars, max_size=200)
seed = st.sampled_from(SEEDS)


def _pump(prefix: str, piece: str, times: int, suffix: str) -> str:
    return prefix + piece * times + suffix


# a text built to be large: a prefix, one piece repeated up to 200,000 characters, a suffix
pumped_text = st.builds(
    _pump,
    st.one_of(seed, plain_text),
    st.one_of(seed, st.text(_chars, min_size=1, max_size=8)).filter(bool),
    st.integers(1, 20_000),
    st.one_of(seed, plain_text),
).map(lambda text: text[:200_000])
hostile_text = st.one_of(
    plain_text,
    seed,
    pumped_text,
    st.lists(st.one_of(seed, plain_text), max_size=12).map("".join),
    st.integers(4000, 6000).map(lambda n: "p/" * (n // 2)),  # a path past PATH_MAX
)
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.one_of(seed, plain_text), inner, max_size=6)
    ),
    max_leaves=30,
)


def _nested(depth: int, as_list: bool) -> str:
    if as_list:
        return "[" * depth + "1" + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


deep_json_text = st.builds(_nested, st.integers(100, 100_000), st.booleans())
raw_bytes = st.one_of(
    st.binary(max_size=400),
    st.builds(lambda a, b: a + b"\xff\xfe\xc3" + b, st.binary(max_size=50), st.binary(max_size=50)),
)


def json_text(value: Any) -> str:
    """JSON with lone surrogates and non-finite numbers as Python writes them."""
    import json

    return json.dumps(value, allow_nan=True)


printable = st.text(string.ascii_letters + string.digits + "_-.", min_size=1, max_size=30)
