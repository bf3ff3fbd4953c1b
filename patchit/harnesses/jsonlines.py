"""One JSON object per line from a child's pipe, read with a timeout (warm runners' protocol)."""

from __future__ import annotations

import json
import os
import select
import time
from typing import IO, Any


class JsonLineReader:
    """Reads whole lines from `stream`'s fd; bytes past the line wait for the next read."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._buffer = b""

    def read(self, timeout_s: float) -> dict[str, Any] | None:
        """The next JSON line, or None on timeout or end of stream."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([self._fd], [], [], remaining)
            if not readable:
                return None
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply
