"""A named secret printed by a verifying run, plainly or encoded, is kept nowhere.

The run is real: the repository's task script, patched in its worktree, runs in a child
Python with a secret-named variable in its environment and prints the value raw, reversed,
as hex, as base64 (standard, URL-safe, unpadded) and inside a `Basic` credential. Every store
is then read raw (the SQLite files row by row, the reports, the branch's commit) and every
base64 or hex run in it decoded: none may hold the secret. Before the fix `verified_json` kept
the raw output and the other columns kept the encoded copies.
"""

from __future__ import annotations

import base64
import binascii
import re
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.fake import FakeHarness, fake_verification
from patchit.loop.context import Context
from patchit.loop.loop import heal
from patchit.memory import Memory
from patchit.patching.base import Edit, PatchCandidate, Proposal, ProposalRequest
from patchit.text.redaction import MASK, Redactor, redact
from patchit.text.secret_forms import MIN_FORM_CHARS, secret_forms
from tests.conftest import git
from tests.evidence.airflow_failures import init_repo, script_failure

SECRET = "envtok-a83c55e9-Zq"
JOB = "dags/totals.py"
SOURCE = textwrap.dedent(
    """\
    import base64
    import os

    secret = os.environ.get("SHOP_API_TOKEN", "")
    print("raw", secret, "reversed", secret[::-1], "hex", secret.encode().hex().upper())
    print("Authorization: Basic", base64.b64encode(("etl:" + secret).encode()).decode())
    print("b64", base64.b64encode(secret.encode()).decode())
    print("url", base64.urlsafe_b64encode(("x" + secret).encode()).decode().rstrip("="))
    rows = [{"amount": 3}]
    print(sum(row["amout"] for row in rows))
    """
)
BROKEN, RIGHT = 'row["amout"]', 'row["amount"]'


def decodable(text: str, secret: str) -> list[str]:
    """Every run of `text` that holds `secret` once decoded: raw, reversed, hex, base64 (both
    alphabets, any alignment of the run)."""
    data = secret.encode()
    found = [form for form in (secret, secret[::-1]) if form in text]
    for run in re.findall(r"[0-9A-Fa-f]{16,}", text):
        for start in (0, 1):
            chunk = run[start : start + (len(run) - start) // 2 * 2]
            if data in binascii.unhexlify(chunk):
                found.append(run)
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}", text):
        for start in range(4):
            chunk = run[start:]
            chunk = chunk[: len(chunk) // 4 * 4]
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    if data in decode(chunk):
                        found.append(run)
                except (binascii.Error, ValueError):
                    pass
    return found


class OneFix:
    name = "scripted"
    tag = "other"
    tier = 0

    def propose(self, request: ProposalRequest) -> Proposal:
        edit = Edit(path=JOB, search=BROKEN, replace=RIGHT)
        candidate = PatchCandidate(
            strategy=self.name, tag="rename_key", rationale="use amount", edits=[edit]
        )
        return Proposal(candidates=[] if request.history else [candidate])

    def close(self) -> None:
        pass


def run_task(workspace: Workspace, event: UniversalFailureEvent) -> Verification:
    """The patched script, run for real with the secret in its environment."""
    proc = subprocess.run(
        [sys.executable, "-P", str(workspace.root / JOB)],
        capture_output=True, text=True, timeout=60, check=False,
        env={"SHOP_API_TOKEN": SECRET, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return fake_verification(event, proc.returncode == 0, proc.stdout + proc.stderr)


@pytest.fixture
def memory(_patchit_home: Path) -> Iterator[Memory]:
    with Memory.open(_patchit_home) as memory:
        yield memory


def test_a_verifying_run_that_prints_a_named_secret_encoded_leaves_no_copy(
    tmp_path: Path, _patchit_home: Path, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, JOB, SOURCE, "total")
    monkeypatch.setenv("SHOP_API_TOKEN", SECRET)
    harness = FakeHarness(run_task, watch=(JOB,))
    ctx = Context(_patchit_home, memory, PatchitConfig(), [OneFix()], [harness])
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    assert outcome.incident.status == "fixed", outcome.incident.summary
    assert SECRET in harness.calls[0].result.output  # the run really printed it
    [attempt] = memory.attempts_for(outcome.incident.id)
    assert attempt.verified_json and MASK in attempt.verified_json
    stores: dict[str, str] = {}
    for db in _patchit_home.rglob("*.sqlite3"):
        conn = sqlite3.connect(db)
        stores[str(db)] = "\n".join(conn.iterdump())
        conn.close()
    for path in _patchit_home.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".json", ".html"):
            stores[str(path)] = path.read_text("utf-8", "replace")
    stores["branch"] = git(repo, "log", "--all", "-p")
    assert "verified_json" in stores[str(_patchit_home / "memory" / "attempts.sqlite3")]
    leaks = {name: found for name, text in stores.items() if (found := decodable(text, SECRET))}
    assert leaks == {}


@pytest.mark.parametrize("secret", [SECRET, "p@ss/wörd+9", "hunter2hunter2!", "abcdefgh"])
def test_every_alignment_of_a_secret_in_a_base64_stream_is_masked(secret: str) -> None:
    data = secret.encode()
    redactor = Redactor([secret])
    for prefix in (b"", b"u", b"us", b"etl:", b"a-longer-prefix:"):
        for suffix in (b"", b"!", b"!!", b":more-bytes"):
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                stream = encode(prefix + data + suffix).decode()
                for shown in (stream, stream.rstrip("=")):
                    text = redactor.redact(f"got {shown} back")
                    assert decodable(text, secret) == [], (prefix, suffix, text)
    for form in (secret[::-1], data.hex(), data.hex().upper()):
        assert redact(f"x {form} y", [secret]) == f"x {MASK} y"


def test_forms_are_computed_once_and_short_ones_are_left_out() -> None:
    assert (
        Redactor([SECRET, "other-secret-1"]).literals
        is Redactor(["other-secret-1", SECRET, SECRET]).literals
    )
    assert all(len(form) >= MIN_FORM_CHARS for form in secret_forms("abcd"))
    # a 4-character secret is masked itself; its forms under 8 characters are not looked for
    assert redact("id abcd, dcba, 61626364", ["abcd"]) == f"id {MASK}, dcba, {MASK}"
    # an unrelated base64 or hex run is kept
    assert redact("sha 0123456789abcdef aGVsbG8gd29ybGQ=", [SECRET]) == (
        "sha 0123456789abcdef aGVsbG8gd29ybGQ="
    )


# a named secret split across string literals or lines, as code or a wrapped log shows it
SPLITS = [
    'token = "envtok-a83c" "55e9-Zq"',
    'token = ("envtok-a83c55e9"\n         "-Zq")',
    'token = "envtok-" + "a83c55e9-Zq"',
    "select 'envtok-a83c55' ||\n  'e9-Zq' as token",
    "headers = {'X': 'envtok-a83c55e9-Z' +\n    'q'}",
    "envtok-a83c55e\n9-Zq",
    "envtok-a83c55e9-Zq".replace("-a8", "-a\r\n8"),
    '{"log": "envtok-a8\\n3c55e9-Zq"}',
    "x = 'envtok-a83c55e9' \\\n    '-Zq'",
]


@pytest.mark.parametrize("text", SPLITS)
def test_a_named_secret_split_across_literals_or_lines_is_masked(text: str) -> None:
    def joined(text: str) -> str:
        return re.sub(r"\\n|[\s\"'+|\\]", "", text)

    assert joined(text).count(SECRET) == 1  # it really held it
    redactor = Redactor([SECRET])
    for out in (redactor.redact(text), redactor.mask_named(text)):  # a report's text, a diff's
        assert MASK in out and SECRET not in joined(out), out


@pytest.mark.parametrize("secret", [SECRET, "p@ss/wörd+9", "hunter2hunter2!"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_base64_wrapped_at_76_columns_is_masked_at_every_wrap(secret: str, newline: str) -> None:
    """MIME base64 (`base64` without -w0, `base64.encodebytes`): whatever column the secret's
    bytes start at, the wrapped stream keeps nothing that decodes to it."""
    redactor = Redactor([secret])
    for prefix in range(0, 120):
        for suffix in (b"", b"!", b" and some more bytes after it"):
            data = bytes(range(65, 65 + 26)) * 5
            wrapped = base64.encodebytes(data[:prefix] + secret.encode() + suffix).decode()
            text = redactor.redact("got:\n" + wrapped.replace("\n", newline) + "end")
            joined = re.sub(r"\s", "", text)
            assert decodable(joined, secret) == [], (prefix, suffix, text)
            assert secret.encode() in base64.b64decode(wrapped)  # it really held it


def test_a_split_copy_needs_the_whole_secret_and_stays_linear() -> None:
    redactor = Redactor([SECRET])
    kept = 'half "envtok-a83c" and "55e9-Zq" apart; envtok-a83c\n55e9-Zx'
    assert redactor.redact(kept) == kept
    for piece in ('"envtok-a83c" "', "envtok-a83c\n", "ZW52dG9rLWE4\n", "envtok-a83c55e9-Z'"):
        text = piece * (200_000 // len(piece))
        started = time.perf_counter()
        redactor.redact(text)
        assert time.perf_counter() - started < 2.0, piece
