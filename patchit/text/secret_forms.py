"""The encoded forms of a named secret, so a copy of it that a run printed encoded is masked too.

A secret the redactor knows by value (a secret-named environment variable, a profile's
password, a configured token) is as readable in a log as base64, hex or reversed: `echo
$TOKEN | base64` in a task, a client that logs its `Authorization: Basic` header, a hex dump
of a request. Each form below is a plain string the redactor looks for, computed once per
secret (`patchit.text.redaction.Redactor` caches them):

- reversed;
- hex, lower and upper case;
- base64, standard and URL-safe, with and without padding;
- the three byte alignments of the secret inside a longer base64 stream (`user:secret`
  encoded whole): the characters that depend on the secret's bytes alone. A stream that
  starts the secret mid-character keeps at most one character of its bits at each end,
  which does not make it decodable.

A form shorter than `MIN_FORM_CHARS` is left out: it would mask innocent text as often as
it hides a secret (the secret itself is still masked whatever its length).

A copy need not be in one piece either: the secret split across two string literals
(`"s3cr3t" "Pa55"`, `'s3cr3t' ||\n 'Pa55'`, `"s3cr3t" +\n "Pa55"`) or two lines, and its
base64 wrapped at 76 columns (MIME, `base64` without `-w0`). `split_forms` gives, for the
secret and each base64 form, a pattern that matches it with a line break or a literal join
at any place, and the probes that say whether to try it: a form split once keeps one of its
halves whole (one split of a line wrapped every 76 characters keeps one of its first four
38-character pieces whole), so a text that holds no probe holds no such copy, and the
pattern (linear: each gap is a bounded, possessive choice) runs only on the rare text that
does.

Standard library only: the Airflow callback redacts with it inside the task process.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

MIN_FORM_CHARS = 8
MIN_PROBE_CHARS = 4
WRAP_PIECE = 38  # half of MIME's 76 columns
# what may stand between two characters of a split copy: a literal's close and the next
# one's open (joined by nothing, `+`, `.`, `,`, `&` or `||`, across a line break too), or a
# line break (a continuation backslash before it, indentation after it; also as a `\n`
# escape, as a JSON or repr of the text shows it)
_BREAK = r"(?:\r?\n|\\r\\n|\\n)"
_JOINED = r"(?:[+.,&]|\|\|)?"
_SPLIT = (
    rf"(?:[\"'][ \t]*+{_JOINED}[ \t]*+\\?(?:{_BREAK}[ \t]*+{_JOINED}[ \t]*+)?"
    rf"[rbfuRBFU]{{0,2}}[\"']|\\?[ \t]*+{_BREAK}[ \t]*+)?+"
)


@dataclass(frozen=True)
class SplitForm:
    """A form of a secret matched across a split (`pattern`), tried only on a text that
    holds one of its `probes`."""

    probes: tuple[str, ...]
    pattern: re.Pattern[str]


def _base64_cores(data: bytes) -> list[str]:
    """For each alignment (0, 1 or 2 bytes before the secret in a stream), the base64
    characters whose 6 bits all come from `data`."""
    cores: list[str] = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode("ascii")
        first_bit, end_bit = 8 * offset, 8 * (offset + len(data))
        start, stop = -(-first_bit // 6), end_bit // 6  # whole characters inside the secret
        cores.append(encoded[start:stop])
    return cores


def secret_forms(secret: str) -> list[str]:
    """The encoded forms of `secret` worth looking for (the secret itself not included),
    longest first, each once."""
    data = secret.encode("utf-8", "surrogateescape")
    found = [secret[::-1], data.hex(), data.hex().upper(), *_base64_forms(data)]
    forms = {f for f in found if len(f) >= MIN_FORM_CHARS and f != secret}
    return sorted(forms, key=len, reverse=True)


def _base64_forms(data: bytes) -> list[str]:
    standard = base64.b64encode(data).decode("ascii")
    found = [standard, standard.rstrip("="), *_base64_cores(data)]
    return found + [f.replace("+", "-").replace("/", "_") for f in found]


def _probes(form: str) -> tuple[str, ...]:
    """Pieces of `form` of which a copy split once (or wrapped at 76 columns) keeps one
    whole: its two halves, or for a longer form its first four 38-character pieces."""
    size = min(-(-len(form) // 2), WRAP_PIECE)
    pieces = [form[i : i + size] for i in range(0, min(len(form), 4 * size), size)]
    return tuple(p for p in pieces if len(p) >= MIN_PROBE_CHARS)


def split_forms(secret: str) -> list[SplitForm]:
    """The secret and its base64 forms (at least `MIN_FORM_CHARS` long), each as a pattern
    that matches a copy split across literals or lines, longest first."""
    data = secret.encode("utf-8", "surrogateescape")
    forms = {f for f in [secret, *_base64_forms(data)] if len(f) >= MIN_FORM_CHARS}
    return [
        SplitForm(_probes(form), re.compile(_SPLIT.join(re.escape(c) for c in form)))
        for form in sorted(forms, key=lambda f: (-len(f), f))
    ]


SplitIndex = tuple[tuple[str, tuple[SplitForm, ...]], ...]  # a probe, the forms it says to try


def split_index(secrets: tuple[str, ...]) -> SplitIndex:
    """The secrets' split forms by probe, each probe once (forms share them)."""
    by_probe: dict[str, list[SplitForm]] = {}
    for secret in secrets:
        for form in split_forms(secret):
            for probe in form.probes:
                by_probe.setdefault(probe, []).append(form)
    return tuple((probe, tuple(forms)) for probe, forms in by_probe.items())


def mask_split(text: str, index: SplitIndex, mask: str) -> str:
    """`text` with every split copy `index` knows replaced by `mask`: a form is tried only
    when the text holds one of its probes (whole copies are masked before: what is left of
    a secret may be a split one)."""
    tried: set[int] = set()
    for probe, forms in index:
        if probe in text:
            for form in forms:
                if id(form) not in tried:
                    tried.add(id(form))
                    text = form.pattern.sub(mask, text)
    return text
