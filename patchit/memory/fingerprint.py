"""Error fingerprints and cause keys: what makes two failures "the same".

`error_fingerprint` identifies one failing unit with one error, stable across runs: it ignores
event ids, run ids, timestamps, commits, try numbers, temp paths, memory addresses and line
drift. The attempt memory is keyed on it (attempt limits, repeated diffs, failed buckets).

`cause_key` drops the unit's identity, so the nodes of one dbt invocation that fail for the same
reason become one incident, and the same failure on the next schedule finds that incident again.
`change_key` is the key of an incident opened for a breaking change (`patchit.loop.change_groups`):
the units one change broke share it whatever their errors; the cause key is what is left when
no change touched what a unit reads.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tempfile
from collections.abc import Iterable

from patchit.events.model import UniversalFailureEvent

FINGERPRINT_CHARS = 16

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# An absolute POSIX path: stops at whitespace, quotes and the punctuation that usually ends one.
_ABS_PATH = re.compile(r"(?<![\w.~])(?:/[^\s'\"`,;:()\[\]<>{}|]+)+")
_TMP_PREFIXES = ("/tmp/", "/var/tmp/", "/var/folders/", "/private/var/folders/", "/private/tmp/")
# Segments that only ever appear in throw-away directories (pytest, patchit sandboxes).
_TMP_SEGMENT = re.compile(
    r"^(pytest-of-.*|pytest-\d+|patchit-(worktree|sandbox|scratch).*|worktrees)$"
)
_AIRFLOW_RUN_ID = re.compile(
    r"\b(?:manual|scheduled|backfill|dataset_triggered|asset_triggered)__[\w:.+\-]+"
)
_ISO_DATETIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}|\b)"
)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_TIME = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b")
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
# Hex ids (git shas, dbt hashes, invocation ids without dashes): 8+ hex chars with a digit.
_HEX_ID = re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b")
# Standalone numbers only: digits glued to letters or underscores are part of identifiers.
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)*(?![\w])")
_SPACE = re.compile(r"\s+")
# dbt appends a hash to generated test names: test.shop.not_null_orders_order_id.a1b2c3d4e5
_DBT_TEST_HASH = re.compile(r"\.[0-9a-f]{6,}$")
# Parts of a message that differ per failing node for one shared cause (DuckDB source excerpt).
_PER_NODE_LINE = re.compile(r"^\s*(LINE \d+:.*|\^+\s*|.*Candidate bindings:.*)$", re.MULTILINE)


def _is_temp_path(path: str) -> bool:
    if path.startswith(_TMP_PREFIXES):
        return True
    tmp_root = tempfile.gettempdir().rstrip("/") + "/"
    if tmp_root != "/" and path.startswith(tmp_root):
        return True
    return any(_TMP_SEGMENT.match(seg) for seg in path.split("/"))


def _replace_temp_path(match: re.Match[str]) -> str:
    path = match.group(0)
    if not _is_temp_path(path):
        return path
    # The file name usually carries meaning ("out.csv"); the directories above it do not.
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if re.fullmatch(r"[A-Za-z][\w\-]*\.[A-Za-z][A-Za-z0-9]{0,7}", name):
        return f"<tmp>/{name}"
    return "<tmp>"


def normalise_message(msg: str, roots: Iterable[str] = ()) -> str:
    """Strip what changes between two runs of the same failure, keep identifiers as they are.

    `roots` are absolute directories (repository, dbt project) replaced by `<repo>` first, so a
    failure reads the same whichever checkout it happened in. A short message is normalised
    once: a storm repeats one message thousands of times (`cause_key`, `storm_key` and
    `error_fingerprint` of each event).
    """
    if len(msg) <= _CACHED_CHARS:
        return _normalised(msg, tuple(roots))
    return _normalise(msg, roots)


_CACHED_CHARS = 4_000


@functools.lru_cache(maxsize=1024)
def _normalised(msg: str, roots: tuple[str, ...]) -> str:
    return _normalise(msg, roots)


def _normalise(msg: str, roots: Iterable[str]) -> str:
    text = _ANSI.sub("", msg)
    for root in sorted((r.rstrip("/") for r in roots if r and r != "/"), key=len, reverse=True):
        text = text.replace(root, "<repo>")
    text = _ABS_PATH.sub(_replace_temp_path, text)
    text = _AIRFLOW_RUN_ID.sub("<run_id>", text)
    text = _ISO_DATETIME.sub("<ts>", text)
    text = _DATE.sub("<date>", text)
    text = _TIME.sub("<time>", text)
    text = _UUID.sub("<uuid>", text)
    text = _ADDRESS.sub("0x<addr>", text)
    text = _HEX_ID.sub("<hex>", text)
    text = _NUMBER.sub("N", text)
    return _SPACE.sub(" ", text).strip()


def stable_unit_id(event: UniversalFailureEvent) -> str:
    """The unit id without parts that change when nothing real changed (dbt test hashes)."""
    if event.source.value == "dbt" and event.unit_id.startswith("test."):
        return _DBT_TEST_HASH.sub("", event.unit_id)
    return event.unit_id


def unit_name(event: UniversalFailureEvent) -> str:
    """The unit's own name: the last segment of its stable id (`orders`, `not_null_x_id`)."""
    return stable_unit_id(event).rsplit(".", 1)[-1]


def _roots(event: UniversalFailureEvent) -> list[str]:
    roots = [event.repo_path or ""]
    if event.dbt is not None:
        roots += [event.dbt.project_dir, event.dbt.cwd]
    return [r for r in roots if r]


def _repo_frames(event: UniversalFailureEvent) -> list[str]:
    """`file:function` of traceback frames in the repository (line numbers drift, these not)."""
    if not event.traceback or not event.repo_path:
        return []
    root = event.repo_path.rstrip("/") + "/"
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', event.traceback)
    return [f"{path[len(root) :]}:{func}" for path, func in frames if path.startswith(root)]


def _digest(parts: list[str]) -> str:
    joined = "\x1f".join(parts)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:FINGERPRINT_CHARS]


def error_fingerprint(event: UniversalFailureEvent) -> str:
    """Stable id of "this unit failing with this error", the key of the attempt memory."""
    message = normalise_message(event.error_message, _roots(event))
    return _digest(
        [
            "fp1",
            event.source.value,
            event.pipeline_id,
            stable_unit_id(event),
            event.error_type,
            message,
            *_repo_frames(event),
        ]
    )


def cause_message(event: UniversalFailureEvent) -> str:
    """The normalised message with everything naming the failing unit itself taken out."""
    text = _PER_NODE_LINE.sub("", _ANSI.sub("", event.error_message))
    if event.unit_path:
        text = text.replace(event.unit_path, "<unit_path>")
    name = unit_name(event)
    if name and name in text:  # a storm's 10,000 names: no pattern compiled for an absent one
        text = re.sub(rf"(?<![\w]){re.escape(name)}(?![\w])", "<unit>", text)
    return normalise_message(text, _roots(event))


def cause_key(event: UniversalFailureEvent) -> str:
    """Stable id of the cause, shared by every unit failing for it (incident grouping).

    A failing data test says only "Got N results": its message names no cause, so the test
    itself is the cause and two different tests never share an incident.
    """
    parts = ["ck1", event.source.value, event.pipeline_id, event.error_type, cause_message(event)]
    if event.status == "fail":
        parts.append(stable_unit_id(event))
    return _digest(parts)


def change_key(event: UniversalFailureEvent, commits: Iterable[str], files: Iterable[str]) -> str:
    """Stable id of a breaking change (`patchit.loop.change_groups`): the commits that touched the
    files the failing units read, and those files, in one pipeline. The error text is not in
    it: units failing differently for one change share it, and a new breaking commit does not.
    """
    parts = ["chg1", event.source.value, event.pipeline_id, *sorted(set(commits)), "\x1e"]
    return _digest([*parts, *sorted(set(files))])
