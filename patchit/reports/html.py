"""Render a `RootCauseReport` as one self-contained HTML page (`<id>.html`).

The page is what gets attached to a ticket or opened from a mail: it loads nothing (inline CSS,
no script, no font, no image, a Content-Security-Policy that forbids them all) and escapes every
value, since errors, outputs and diffs are user data. It says what the Markdown report says; the
diffs are coloured line by line, the attempts are a timeline.
"""

from __future__ import annotations

import re

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from patchit.reports.model import RootCauseReport

# what a next action starts with when it is a command to type
_COMMANDS = frozenset(
    {"airflow", "cd", "dbt", "docker", "git", "make", "patchit", "pip", "psql", "python"}
)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*([^*\n]+)\*\*")


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """(class, text) per line of a unified diff: add, del, hunk, meta (file headers) or ctx."""
    out = []
    for line in diff.strip("\n").splitlines():
        if line.startswith(("diff --git ", "index ", "--- ", "+++ ", "new file", "deleted file")):
            cls = "meta"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        else:
            cls = "ctx"
        out.append((cls, line))
    return out


def inline(text: object) -> Markup:
    """Escape `text`, then set its `code` spans and **bold** as Markdown would."""
    safe = str(escape(str(text)))
    safe = _INLINE_CODE.sub(r"<code>\1</code>", safe)
    return Markup(_BOLD.sub(r"<strong>\1</strong>", safe))


def action(text: str) -> Markup:
    """A next action: a command in <code>, or a sentence ending in one (`re-run it: dbt ...`)."""
    if text.split(" ", 1)[0] in _COMMANDS:
        return Markup("<code>{}</code>").format(text)
    head, sep, tail = text.partition(": ")
    if sep and tail.split(" ", 1)[0] in _COMMANDS:
        return Markup("{}: <code>{}</code>").format(head, tail)
    return inline(text)


def css_ident(value: object) -> str:
    """`value` as a safe CSS class suffix (a status, an outcome)."""
    return re.sub(r"[^a-z0-9_-]", "-", str(value).lower()) or "unknown"


def markdown_blocks(text: str) -> Markup:
    """The little Markdown a data check is written in (bullets, one table, code blocks,
    paragraphs) as HTML, every piece escaped."""
    parts: list[str] = []
    bullets: list[str] = []
    table: list[list[str]] = []
    code: list[str] | None = None

    def flush() -> None:
        if bullets:
            parts.append("<ul>" + "".join(f"<li>{b}</li>" for b in bullets) + "</ul>")
            bullets.clear()
        if table:
            head = "".join(f"<th>{inline(c)}</th>" for c in table[0])
            body = "".join(
                "<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>"
                for row in table[1:]
            )
            parts.append(f'<table class="grid"><thead><tr>{head}</tr></thead>'
                         f"<tbody>{body}</tbody></table>")  # fmt: skip
            table.clear()

    for line in text.splitlines():
        if code is not None:
            if line.strip() == "```":
                parts.append(f"<pre>{escape(chr(10).join(code))}</pre>")
                code = None
            else:
                code.append(line)
        elif line.strip().startswith("```"):
            flush()
            code = []
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):  # not the |---| line
                table.append(cells)
        elif line.startswith("- "):
            if table:
                flush()
            bullets.append(inline(line[2:]))
        else:
            flush()
            if line.strip():
                parts.append(f"<p>{inline(line)}</p>")
    if code is not None:
        parts.append(f"<pre>{escape(chr(10).join(code))}</pre>")
    flush()
    return Markup("\n".join(parts))


_env = Environment(
    loader=PackageLoader("patchit.reports", "templates"),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=True,  # HTML: every value is escaped unless a filter here made it Markup
)
_env.filters.update(inline=inline, action=action, css_ident=css_ident, blocks=markdown_blocks)
_env.globals.update(diff_lines=diff_lines)


def render_html(report: RootCauseReport) -> str:
    return _env.get_template("report.html.j2").render(r=report)
