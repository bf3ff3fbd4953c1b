"""The one exception tree of patchit.

    PatchitError                 anything patchit raises on purpose
    ├── BadInputError            an input the user gave is wrong (exit 2); names the input
    ├── HarnessError             a harness could not run at all (missing binary, broken sandbox)
    ├── VcsError                 a git command failed
    ├── MemoryStoreError         the attempt memory could not be read or written
    └── SpoolError               the spool could not be read or written (by a worker)

User-facing messages are one line: what was wrong, with which input, and what to do.
"""

from __future__ import annotations


def one_line(message: object) -> str:
    """An error message as one printable line (a file name may hold a newline or bad bytes)."""
    text = str(message).encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(text.splitlines()))


class PatchitError(Exception):
    """Base of every error patchit raises on purpose."""


class BadInputError(PatchitError):
    """An input (file, directory, option) is unusable. The message names it and the fix."""


class HarnessError(PatchitError):
    """A harness could not run at all; a failing pipeline is not a HarnessError."""


class VcsError(PatchitError):
    """A git operation failed."""


class MemoryStoreError(PatchitError):
    """The attempt memory could not be opened, migrated or written. `retryable`: the shared
    state's connection was lost inside a transaction that is known to be rolled back, and it
    is open again: the work that wrote it can run again (the worker does)."""

    retryable: bool = False


class SpoolError(PatchitError):
    """The spool could not be opened, read or written by a worker or `patchit spool`."""


class PatchitWarning(UserWarning):
    """Warnings patchit itself emits (tests turn them into errors)."""
