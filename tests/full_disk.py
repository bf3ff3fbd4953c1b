"""A real full disk for tests: a small tmpfs mounted in the test (root only), filled up.

The kernel then answers writes with ENOSPC, as a full production disk does; nothing is
mocked. `mount_tmpfs` returns None where this process may not mount (not root, or a
container without CAP_SYS_ADMIN): the tests that need a full *filesystem* say so, and the
callback's tests fall back to a file-size rlimit (EFBIG from the kernel) in a child.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def mount_tmpfs(path: Path, size_kb: int) -> Iterator[Path | None]:
    """A tmpfs of `size_kb` at `path` for the block, or None if it cannot be mounted here."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        yield None
        return
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Write zeros into `directory` until its filesystem is full (ENOSPC); the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler
