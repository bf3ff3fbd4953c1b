"""The encoded forms of a named secret, so a copy of it that a run printed encoded is masked too.

A secret the redactor knows by value (a secret-named environment variable, a profile's
password, a configured token) is as readable in a log as base64, hex or reversed: `echo
$TOKEN | base64` in a task, a client that logs its `Authorization: Basic` header, a hex dump
of a request. Each form below is a plain string the redactor looks for, computed once per
secret (`patchit.redaction.Redactor` caches them):

- reversed;
- hex, lower and upper case;
- base64, standard and URL-safe, with and without padding;
- the three byte alignments of the secret inside a longer base64 stream (`user:secret`
  encoded whole): the characters that depend on the secret's bytes alone. A stream that
  starts the secret mid-character keeps at most one character of its bits at each end,
  which does not make it decodable.

A form shorter than `MIN_FORM_CHARS` is left out: it would mask innocent text as often as
it hides a secret (the secret itself is still masked whatever its length).

Standard library only: the Airflow callback redacts with it inside the task process.
"""

from __future__ import annotations

import base64

MIN_FORM_CHARS = 8


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
    standard = base64.b64encode(data).decode("ascii")
    found = [secret[::-1], data.hex(), data.hex().upper(), standard, standard.rstrip("=")]
    found += _base64_cores(data)
    found += [f.replace("+", "-").replace("/", "_") for f in found[3:]]  # URL-safe
    forms = {f for f in found if len(f) >= MIN_FORM_CHARS and f != secret}
    return sorted(forms, key=len, reverse=True)
