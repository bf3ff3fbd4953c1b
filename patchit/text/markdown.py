"""Markdown that quotes untrusted text safely: the report is also a pull request's body.

Error messages, commit subjects, output tails and rows of data come from the code being healed
and its warehouse. Quoted raw, an `<img onerror=...>` or a `<details>` in an error message is
HTML to a code host's renderer, and a "```" in an output tail closes its fence, turning the
rest into Markdown. So:
- `escape_html`: `&`, `<` and `>` as entities, for text outside code (a renderer shows the
  characters; the raw file stays readable);
- `fence`: a fenced block whose fence is longer than any run of backticks in the text;
- `code`: an inline code span whose backticks no run in the text matches;
- `escape_outside_fences`: Markdown patchit wrote itself (the data check) escaped outside its
  own fences.
Each returns `Safe`, which the report's template passes through as it is.
"""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class Safe(str):
    """Markdown already made safe to render: the template writes it unchanged."""


def escape_html(text: str) -> Safe:
    return Safe(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def _longest_run(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def fence(text: str, info: str = "") -> Safe:
    """`text` as a fenced code block (no trailing newline), shown verbatim by any renderer."""
    bar = "`" * max(3, _longest_run(text) + 1)
    return Safe(f"{bar}{info}\n{text}\n{bar}")


def code(text: str) -> Safe:
    """`text` as an inline code span, shown verbatim."""
    text = text.replace("\n", " ")  # a span inside a table row must not end the row
    runs = {len(run) for run in _BACKTICKS.findall(text)}
    size = next(n for n in range(1, len(runs) + 2) if n not in runs)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return Safe(f"{'`' * size}{pad}{text}{pad}{'`' * size}")


def escape_outside_fences(markdown: str) -> Safe:
    """`escape_html` on every line outside a fenced code block (inside, text is verbatim)."""
    out: list[str] = []
    opened = ""
    for line in markdown.split("\n"):
        found = _FENCE.match(line)
        if opened:
            mark = found.group(1) if found else ""
            closes = mark[:1] == opened[0] and len(mark) >= len(opened)
            if closes and not line.strip().strip(mark[0]):
                opened = ""
            out.append(line)
        elif found:
            opened = found.group(1)
            out.append(escape_html(line))
        else:
            out.append(escape_html(line))
    return Safe("\n".join(out))
