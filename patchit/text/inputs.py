"""Reading files that come from outside: event files, dbt artifacts, task logs, profiles.

Such a path may name anything. A FIFO, a device, a socket or a directory where a file is
expected is refused before it is opened (`os.stat`), and the open itself is non-blocking with
a second check on the open file, so a path swapped in between cannot hang patchit either. A
file is read up to a size cap; text must be UTF-8 (or is decoded with replacements where the
caller says so); JSON nested too deep, numbers too long or bad bytes are refused. Every refusal
is a `BadInputError` with one line naming the path (shortened and escaped for display).

Standard library only: the Airflow callback's git reading uses it inside the task process.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from patchit.errors import BadInputError

MAX_INPUT_BYTES = 64 * 1024 * 1024
_SHOWN_PATH_CHARS = 160
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_MISSING = {errno.ENOENT, errno.ENOTDIR}
PathLike = str | os.PathLike[str]
T = TypeVar("T")
_PARSED_MAX = 64  # parsed files kept
_PARSED_MAX_BYTES = 1024 * 1024  # larger ones are parsed every time
_parsed: dict[tuple[str, bytes], Any] = {}
_parsed_lock = threading.Lock()


def shown(path: PathLike) -> str:
    """A path for a one-line message: control characters escaped, a long one shortened."""
    text = os.fspath(path)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > _SHOWN_PATH_CHARS:
        half = _SHOWN_PATH_CHARS // 2
        text = f"{text[:half]}...({len(text) - 2 * half} more characters)...{text[-half:]}"
    return text


def _stat(path: PathLike) -> os.stat_result | None:
    """`os.stat`, or None when the path cannot name a file (too long, a NUL byte, a loop)."""
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def input_exists(path: PathLike) -> bool:
    """Whether anything is there (never raises: a path too long to exist does not)."""
    return _stat(path) is not None


def is_regular_file(path: PathLike) -> bool:
    """Whether `path` is a regular file (never raises, never opens it)."""
    found = _stat(path)
    return found is not None and stat.S_ISREG(found.st_mode)


def is_directory(path: PathLike) -> bool:
    """Whether `path` is a directory (never raises)."""
    found = _stat(path)
    return found is not None and stat.S_ISDIR(found.st_mode)


def _refuse_kind(path: PathLike, mode: int, what: str) -> None:
    for test, kind in _KINDS:
        if test(mode):
            raise BadInputError(f"{shown(path)}: {what} is {kind}, not a regular file")
    if not stat.S_ISREG(mode):
        raise BadInputError(f"{shown(path)}: {what} is not a regular file")


def read_input_bytes(
    path: PathLike, max_bytes: int = MAX_INPUT_BYTES, *, tail: bool = False, what: str = "file"
) -> bytes:
    """The bytes of a regular file; with `tail`, only its last `max_bytes`, else a larger
    file is refused. `what` names the file in messages ("event file")."""
    try:
        _refuse_kind(path, os.stat(path).st_mode, what)
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags | getattr(os, "O_NOCTTY", 0))
    except ValueError as exc:  # a NUL byte in the path
        raise BadInputError(f"{shown(path)}: cannot read {what} (a NUL byte in the path)") from exc
    except OSError as exc:
        reason = "no such file" if exc.errno in _MISSING else exc.strerror or str(exc)
        raise BadInputError(f"{shown(path)}: cannot read {what} ({reason})") from exc
    with os.fdopen(fd, "rb") as handle:
        try:
            opened = os.fstat(fd)
            _refuse_kind(path, opened.st_mode, what)  # swapped after the first look
            size = opened.st_size
            if size > max_bytes:
                if not tail:
                    raise BadInputError(
                        f"{shown(path)}: {what} is {size} bytes, more than the {max_bytes} "
                        "patchit reads"
                    )
                handle.seek(size - max_bytes)
            return handle.read(max_bytes)
        except OSError as exc:
            raise BadInputError(
                f"{shown(path)}: cannot read {what} ({exc.strerror or exc})"
            ) from exc


def read_input_text(
    path: PathLike,
    max_bytes: int = MAX_INPUT_BYTES,
    *,
    tail: bool = False,
    strict: bool = True,
    what: str = "file",
) -> str:
    """A regular file as UTF-8 text: strict (bad bytes refused) or with bad bytes replaced."""
    data = read_input_bytes(path, max_bytes, tail=tail, what=what)
    if not strict:
        return data.replace(b"\x00", b"").decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(
            f"{shown(path)}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start})"
        ) from exc


def parse_json(text: str, where: str) -> Any:
    """JSON text as Python values; BadInputError naming `where` for anything unparseable."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if not text[exc.pos :].strip():  # it stops mid-value: a file cut short
            raise BadInputError(
                f"{where}: not valid JSON: truncated (it ends in the middle of a value at line "
                f"{exc.lineno}; was its writer killed?)"
            ) from exc
        raise BadInputError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    except RecursionError as exc:
        raise BadInputError(f"{where}: not valid JSON (nested too deep)") from exc
    except ValueError as exc:  # e.g. an integer longer than Python converts
        raise BadInputError(f"{where}: not valid JSON ({str(exc).splitlines()[0]})") from exc


def read_input_json(path: PathLike, max_bytes: int = MAX_INPUT_BYTES, what: str = "file") -> Any:
    """A regular UTF-8 JSON file as Python values."""
    return parse_json(read_input_text(path, max_bytes, what=what), shown(path))


def read_input_json_or_none(path: PathLike | None, max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """`read_input_json`, or None for a missing path or any file that cannot be used."""
    if not path:
        return None
    try:
        return read_input_json(path, max_bytes)
    except BadInputError:
        return None


def read_input_text_or_none(
    path: PathLike, max_bytes: int = MAX_INPUT_BYTES, *, tail: bool = False, strict: bool = True
) -> str | None:
    """`read_input_text`, or None for a missing or unusable file."""
    try:
        return read_input_text(path, max_bytes, tail=tail, strict=strict)
    except BadInputError:
        return None


def as_path(raw: object) -> Path | None:
    """A usable `Path` from outside text (an event field), or None (empty, a NUL byte)."""
    if not isinstance(raw, str | os.PathLike) or not os.fspath(raw) or "\x00" in os.fspath(raw):
        return None
    return Path(raw)


# -- parsed JSON from outside: take what has the expected shape, leave the rest -------------


def as_dict(value: object) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    """`value` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: object) -> str | None:
    """`value` when it is a string, else None."""
    return value if isinstance(value, str) else None


def parsed_once(
    path: PathLike,
    parse: Callable[[Path, str], T],
    kind: str,
    otherwise: Callable[[Path], T],
) -> T:
    """`parse(path, text)` of the file's UTF-8 text, kept by the text's hash (and `kind`, the
    parser's name) and handed out as a deep copy: a warm harness reads the same
    dbt_project.yml and profiles.yml, in a new worktree, for every candidate. `parse` must
    depend on the text alone (`path` only names it in messages); what it raises is raised
    every time. A file that cannot be read as such (missing, not a regular file, not UTF-8,
    over 1 MiB) goes to `otherwise(path)`, which says what is wrong in its own words."""
    try:
        text = read_input_text(path, _PARSED_MAX_BYTES)
    except BadInputError:
        return otherwise(Path(path))
    key = (kind, hashlib.sha256(text.encode("utf-8")).digest())
    with _parsed_lock:
        found = key in _parsed
        value: T = _parsed[key] if found else None  # type: ignore[assignment]
    if not found:
        value = parse(Path(path), text)
        with _parsed_lock:
            while len(_parsed) >= _PARSED_MAX:
                _parsed.pop(next(iter(_parsed)))
            _parsed[key] = value
    return copy.deepcopy(value)
