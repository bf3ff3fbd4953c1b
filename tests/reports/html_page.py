"""Reading an HTML page as a reader would: its elements' text by class and id (stdlib
`html.parser`), the Chromium to render it, and the colours a screenshot holds (a stdlib PNG
decoder: the suite has no imaging library)."""

from __future__ import annotations

import shutil
import struct
import zlib
from html.parser import HTMLParser

import pytest


class Page(HTMLParser):
    """What a page holds: its tags' attributes, the text by element id and by class."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.by_class: dict[str, list[str]] = {}
        self.ids: set[str] = set()
        self.headings: list[str] = []
        self._open: list[tuple[str, str]] = []  # (tag, class)
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags.append((tag, found))
        if "id" in found:
            self.ids.add(found["id"])
        if tag not in ("meta", "br", "hr", "img", "input", "link"):
            self._open.append((tag, found.get("class", "")))
            if tag == "h2":
                self.headings.append("")
            for cls in found.get("class", "").split():
                self.by_class.setdefault(cls, []).append("")

    def text(self, cls: str) -> list[str]:
        """The text of each element of class `cls`, without a diff line's closing newline."""
        return [t.removesuffix("\n") for t in self.by_class.get(cls, [])]

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        for tag, classes in self._open:
            if tag == "h2":
                self.headings[-1] += data
            for cls in classes.split():
                self.by_class[cls][-1] += data


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "chromium is not installed: `make test` installs it (the Makefile's `chromium` "
            "target; or apt-get install chromium). The HTML report's browser test needs it.",
            pytrace=False,
        )
    return found


def png_pixels(data: bytes) -> tuple[int, int, set[tuple[int, int, int]]]:
    """Width, height and the set of RGB colours of an 8-bit RGB(A) PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, idat = 8, {}, b""
    while pos < len(data):
        (size,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + size]
        idat += body if kind == b"IDAT" else b""
        chunks.setdefault(kind, body)
        pos += 12 + size
    width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
    bpp = 4 if ctype == 6 else 3
    raw, stride, prev = zlib.decompress(idat), width * bpp, bytearray(width * bpp)
    colours = set()
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 2 and not any(line):
            continue  # the row above again (most of a page): same colours
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        colours.update(zip(line[0::bpp], line[1::bpp], line[2::bpp], strict=True))
        prev = line
    return width, height, colours
