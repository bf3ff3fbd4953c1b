"""Python tracebacks and task logs: parse the frames, keep the repository's own, pack to a budget.

A task log or a traceback can be megabytes (a loop that logged every row, a binary blob, a
chained exception a hundred frames deep). Evidence keeps the error, the chain of causes and
the frames that run repository code with a few lines of source around each, innermost first,
until the character budget is spent; library frames are dropped, because a fix never goes there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchit.events.model import RuntimeFrame, RuntimeValue
from patchit.evidence.model import TracebackFrame
from patchit.text.inputs import read_input_text_or_none

LOG_TAIL_BYTES = 2_000_000
DEFAULT_BUDGET_CHARS = 8_000
CONTEXT_LINES = 3

# a line number of more digits than any file has is not a frame (int() refuses 4,300 digits)
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d{1,9}), in (?P<func>.+?)\s*$')
_MARKER = re.compile(r"^\s*[\^~\-+ ]+$")
_LOCAL = re.compile(r"^\s{4,}(?P<name>[A-Za-z_]\w*) = (?P<value>.*)$")
_TB_START = "Traceback (most recent call last):"
# An exception header: `KeyError: 'x'`, `airflow.sdk.exceptions.AirflowTaskTimeout: ...`.
_EXC_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_NOT_REPO_PARTS = {"site-packages", "dist-packages", ".venv", "venv", ".tox", "__pypackages__"}
# Calls that write a file: open(..., "w"/"a"/"x"), pandas/pathlib writers, shutil copies.
_WRITE_CALL = re.compile(
    r"""\bopen\([^)]*['"](?:[rb+]*[wax][bt+]*)['"]|\bmode\s*=\s*['"][rb+]*[wax]"""
    r"""|\.to_(?:csv|parquet|json|excel|feather|pickle|orc|html|xml|sql)\("""
    r"""|\.write_(?:text|bytes)\(|\bshutil\.(?:copy\w*|move)\(|\.savefig\(|\bjson\.dump\("""
)


@dataclass
class RawFrame:
    """A frame as the traceback printed it (path absolute, as on the machine that failed)."""

    path: str
    line: int
    function: str
    code: str = ""
    locals: dict[str, str] = field(default_factory=dict)


def last_traceback(text: str) -> str:
    """The last `Traceback (most recent call last):` block and the error after it."""
    start = text.rfind(_TB_START)
    return text[start:] if start != -1 else text


def parse_frames(text: str) -> list[RawFrame]:
    """The frames of the final exception in `text`, outermost first."""
    frames: list[RawFrame] = []
    lines = last_traceback(text).splitlines()
    for i, line in enumerate(lines):
        found = _FRAME.match(line)
        if found is None:
            continue
        frame = RawFrame(found["path"], int(found["line"]), found["func"])
        for follow in lines[i + 1 :]:
            if _FRAME.match(follow) or not follow.startswith(" "):
                break
            if _MARKER.match(follow):
                continue
            local = _LOCAL.match(follow) if frame.code else None
            if local:
                frame.locals[local["name"]] = local["value"][:500]
            elif not frame.code:
                frame.code = follow.strip()
        frames.append(frame)
    return frames


def exception_chain(text: str) -> list[str]:
    """Every exception header in `text` (causes first, the final error last), deduplicated."""
    found: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line or line[0].isspace() or line.startswith((_TB_START, "During handling")):
            continue
        header = _EXC_LINE.match(line.rstrip())
        prior = lines[i - 1] if i else ""
        # a header follows a frame's source (indented) or a marker line, never prose
        if header and header["msg"] is not None and prior.startswith(" "):
            found.append(line.rstrip()[:2000])
    return list(dict.fromkeys(found))


def is_write_call(code: str) -> bool:
    """Whether a source line writes a file (so a missing directory is the code's to create)."""
    return _WRITE_CALL.search(code) is not None


def repo_relative(printed: str, roots: list[Path]) -> str | None:
    """A traceback path as a path relative to the first root holding it; None for library code.

    The failing machine's checkout (event.repo_path) may not exist here, so paths are compared
    as text after normalising, then after resolving symlinks.
    """
    if not printed or printed.startswith("<"):
        return None
    norm = os.path.normpath(printed)
    for root in roots:
        for base in dict.fromkeys((os.path.normpath(str(root)), _resolved(root))):
            if norm.startswith(base.rstrip(os.sep) + os.sep):
                rel = Path(os.path.relpath(norm, base))
                if _NOT_REPO_PARTS.isdisjoint(rel.parts):
                    return rel.as_posix()
                return None
    return None


def _resolved(path: Path) -> str:
    try:
        return str(path.resolve())
    except OSError:
        return str(path)


def repo_frames(frames: list[RawFrame], roots: list[Path]) -> list[TracebackFrame]:
    """The frames running repository code, with paths relative to the repository."""
    kept: list[TracebackFrame] = []
    for frame in frames:
        rel = repo_relative(frame.path, roots)
        if rel is not None:
            kept.append(
                TracebackFrame(
                    path=rel,
                    line=frame.line,
                    function=frame.function,
                    code=frame.code,
                    locals=frame.locals,
                )
            )
    return kept


def read_log_tail(path: Path, max_bytes: int = LOG_TAIL_BYTES) -> str | None:
    """The last `max_bytes` of a log file as text (bad bytes replaced); None when unreadable
    or not a regular file (a FIFO or a device is never opened to block)."""
    return read_input_text_or_none(path, max_bytes, tail=True, strict=False)


def repo_runtime_frame(
    runtime: RuntimeFrame | None, roots: list[Path], notes: list[str]
) -> RuntimeFrame | None:
    """The event's runtime locals with their path relative to the repository; None (and a
    note) when they belong to a frame outside it."""
    if runtime is None:
        return None
    rel = repo_relative(runtime.path, roots)
    if rel is None:
        notes.append(f"runtime locals of {runtime.path} ignored: not a file of the repository")
        return None
    return runtime.model_copy(update={"path": rel})


def describe_value(value: RuntimeValue, max_names: int = 20) -> str:
    """`dict(3) keys: amount: str, customer: str, ...`: a runtime local in one line."""
    text = value.type + (f"({value.size})" if value.size is not None else "")
    if value.value is not None:
        text += f" = {value.value}"
    for label, names in (("keys", value.keys), ("attrs", value.attrs)):
        if names is not None:
            shown = [f"{k}: {t}" for k, t in list(names.items())[:max_names]]
            more = value.truncated or len(names) > max_names
            text += f" {label}: " + ", ".join(shown) + (", ..." if more else "")
    if value.params is not None:
        text += f" params: ({', '.join(value.params)})"
    if value.item is not None:
        text += f" first item: {describe_value(value.item, max_names)}"
    return text


def runtime_lines(runtime: RuntimeFrame) -> list[str]:
    """The runtime locals as lines under their frame (names and types only)."""
    lines = ["      runtime locals (names and types, no values):"]
    lines += [f"        {name}: {describe_value(value)}" for name, value in runtime.locals.items()]
    return lines + [f"        ({note})" for note in runtime.notes]


def _frame_block(
    frame: TracebackFrame,
    source: str | None,
    context_lines: int,
    runtime: RuntimeFrame | None = None,
) -> str:
    head = f"{frame.path}:{frame.line} in {frame.function}"
    if source is None:
        return f"{head}\n  > {frame.code}" if frame.code else head
    lines = source.splitlines()
    first = max(1, frame.line - context_lines)
    last = min(len(lines), frame.line + context_lines)
    body = [
        f"{'>' if n == frame.line else ' '} {n:4d} | {lines[n - 1]}" for n in range(first, last + 1)
    ]
    shown = [head, *body]
    shown += [f"      {k} = {v}" for k, v in frame.locals.items()]
    if runtime is not None and (runtime.path, runtime.line) == (frame.path, frame.line):
        shown += runtime_lines(runtime)
    return "\n".join(shown)


def pack_log(
    error: str,
    frames: list[TracebackFrame],
    read_source: Callable[[str], str | None],
    log_text: str | None = None,
    budget_chars: int = DEFAULT_BUDGET_CHARS,
    context_lines: int = CONTEXT_LINES,
    runtime: RuntimeFrame | None = None,
) -> str:
    """The error, then in-repo frames innermost first with source context, then the log's
    error lines, cut to `budget_chars`."""
    parts = [error[: budget_chars // 4]]
    used = len(parts[0])
    if frames:
        parts.append("in-repo frames (innermost first):")
    for frame in reversed(frames):
        block = _frame_block(frame, read_source(frame.path), context_lines, runtime)
        if used + len(block) > budget_chars:
            parts.append(f"... {len(frames)} in-repo frame(s) in all, budget reached")
            break
        parts.append(block)
        used += len(block) + 1
    if log_text:
        wanted = [
            ln[:400] for ln in log_text.splitlines() if re.search(r"ERROR|CRITICAL|Error:", ln)
        ]
        tail: list[str] = []
        for line in reversed(wanted[-40:]):
            if used + len(line) > budget_chars:
                break
            tail.insert(0, line)
            used += len(line) + 1
        if tail:
            parts += ["log lines with errors (last):", *tail]
    return "\n".join(parts)[:budget_chars]
