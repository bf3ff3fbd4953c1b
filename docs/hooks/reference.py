"""The docs' reference pages, generated from the code at build time so they cannot drift.

An mkdocs hook (`hooks:` in mkdocs.yml): `on_files` adds pages that exist in no file of
`docs/`: every command from the click tree (help, usage, options), every setting from the
pydantic config (type, default, limits, who may set it), the JSON schemas of the failure event
and the report, and the benchmark tables the bench writes (`benchmarks/results/*.md`). A
command or a setting added to the code is in the next build; one the generator would leave out
fails `tests/docs/test_site.py`. The functions are plain, so the tests call them without mkdocs.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parents[2]

# page (as the nav names it) -> the benchmark result it shows, and what the run was
BENCH_PAGES = {
    "benchmarks/corpus-duckdb.md": (
        "latest.md",
        "The corpus on DuckDB",
        "The latest full run of the scenario corpus (`patchit bench`), as the bench wrote it "
        "to `benchmarks/results/latest.md`.",
    ),
    "benchmarks/corpus-postgres.md": (
        "latest-postgres.md",
        "The corpus on Postgres",
        "The latest full run of the corpus's dbt scenarios on a throw-away PostgreSQL 15 "
        "cluster (`patchit bench --warehouse postgres`), from "
        "`benchmarks/results/latest-postgres.md`.",
    ),
    "benchmarks/corpus-snowflake.md": (
        "latest-snowflake.md",
        "The corpus on Snowflake",
        "The latest run of the corpus's dbt scenarios on a throw-away Snowflake emulator "
        "(fakesnow 0.12; `patchit bench --warehouse snowflake`, in two `--only` halves on one "
        "code state, combined), from `benchmarks/results/latest-snowflake.md`.",
    ),
    "benchmarks/subset.md": (
        "subset.md",
        "The subset `make test` runs",
        "One scenario per expected verdict (`tests/bench/corpus_subset.py`), from "
        "`benchmarks/results/subset.md`.",
    ),
}


def walk_commands(group: click.Group, prefix: str) -> Iterator[tuple[str, click.Command]]:
    """Every command under `group`, depth first, as `patchit spool list`."""
    ctx = click.Context(group, info_name=prefix)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        path = f"{prefix} {name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from walk_commands(command, path)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _help(text: str | None) -> str:
    """click's help text as Markdown paragraphs: `\\b` blocks kept as they are, `\\f` cut."""
    text = inspect.cleandoc(text or "").split("\f")[0]
    out: list[str] = []
    for block in text.split("\n\n"):
        if block.startswith("\b\n"):
            out.append("```\n" + block[2:] + "\n```")
        else:
            out.append(" ".join(block.split()))
    return "\n\n".join(out)


def _anchor(path: str) -> str:
    return path.replace(" ", "-")


def _option_row(param: click.Parameter) -> str:
    names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
    if isinstance(param, click.Option) and param.is_flag:
        kind = "flag"
    else:
        kind = param.type.name.upper() if param.type is not None else ""
        choices = getattr(param.type, "choices", None)
        if choices:
            kind = " \\| ".join(f"`{choice}`" for choice in choices)
        elif kind:
            kind = f"`{kind}`"
    if getattr(param, "multiple", False):
        kind += " (repeatable)"
    default = param.default
    unset = default is None or repr(default).startswith("Sentinel.")  # click 8.3's UNSET
    shown = "" if unset or default in (False, (), [], "") or callable(default) else f"`{default}`"
    help_text = getattr(param, "help", "") or ""
    return f"| {names} | {kind} | {shown} | {_cell(help_text)} |"


def cli_reference() -> str:
    """Every command of `patchit`, from its click definition."""
    from patchit.cli.main import cli

    lines = [
        "# Commands",
        "",
        "Generated from the click commands at build time (`docs/hooks/reference.py`): what "
        "`patchit COMMAND --help` prints, as a page. The [how-to guides](../how-to/wrapper.md) "
        "say when to use each.",
        "",
        "Global options, before the command:",
        "",
        "| option | value | default | what it does |",
        "|---|---|---|---|",
    ]
    lines += [_option_row(p) for p in cli.params if isinstance(p, click.Option) and p.help]
    lines += [
        "",
        "`ID` is an incident's full id (`20261128-7f2ec7`), its hex part (`7f2ec7`), or a "
        "prefix of either that names one incident; one naming several is refused with the "
        "candidates.",
        "",
    ]
    for path, command in walk_commands(cli, "patchit"):
        ctx = click.Context(command, info_name=path)
        pieces = " ".join(command.collect_usage_pieces(ctx))
        level = "#" * (path.count(" ") + 1)
        lines += [f'{level} {path} {{ #{_anchor(path)} data-toc-label="{path}" }}', ""]
        lines += ["```", f"{path} {pieces}".rstrip(), "```", "", _help(command.help), ""]
        options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        if arguments:
            names = ", ".join(f"`{a.human_readable_name}`" for a in arguments)
            lines += [f"Arguments: {names}.", ""]
        if options:
            lines += ["| option | value | default | what it does |", "|---|---|---|---|"]
            lines += [_option_row(p) for p in options]
            lines.append("")
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=path)
            subs = [f"{path} {name}" for name in command.list_commands(ctx)]
            links = [f"[`{sub}`](#{_anchor(sub)})" for sub in subs]
            lines += ["Subcommands: " + ", ".join(links) + ".", ""]
    return "\n".join(lines) + "\n"


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is type(None):
        return "none"
    return getattr(annotation, "__name__", str(annotation))


def _toml(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float | list):
        return json.dumps(value)
    return str(value)


def _limits(field: FieldInfo) -> str:
    said: list[str] = []
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "max_length": "length <="}
    for meta in field.metadata:
        for attr, word in words.items():
            if getattr(meta, attr, None) is not None:
                said.append(f"{word} {getattr(meta, attr)}")
        pattern = getattr(meta, "pattern", None)
        if pattern:
            choices = re.fullmatch(r"\^\(?([\w|]+)\)?\$", pattern)
            said.append(
                "one of " + ", ".join(f'"{c}"' for c in choices.group(1).split("|"))
                if choices
                else f"matches `{pattern}`"
            )
    return "; ".join(said)


def _who(section: str, name: str, deployment_only: bool) -> str:
    from patchit.policy.settings import NARROWED_SECTIONS, NARROWERS, OPERATOR_ONLY

    if deployment_only:
        return "operator (`$PATCHIT_HOME/patchit.toml`)"
    if (section, name) in OPERATOR_ONLY:
        env = OPERATOR_ONLY[(section, name)]
        return "operator" + (f" (or `{env}`)" if env else "")
    if (section, name) in NARROWERS or section in NARROWED_SECTIONS:
        return "operator; a repository may only narrow it"
    return "operator or repository"


def settings_reference() -> str:
    """Every setting of both files, from the pydantic models `patchit.config` defines."""
    from patchit.config import DeploymentConfig, PatchitConfig

    lines = [
        "# Settings",
        "",
        "Generated from the pydantic models in `patchit/config.py` at build time "
        "(`docs/hooks/reference.py`). Two files take the same sections: the operator's "
        "`$PATCHIT_HOME/patchit.toml` and a repository's `.patchit.toml`, read at the "
        "project's last good commit. *Who sets it* comes from `patchit/policy/settings.py`: an "
        "operator-only setting in a repository's file is ignored with one line; one a "
        "repository may only narrow keeps the operator's value when the repository's is "
        "looser. [Configuration](../how-to/policy.md) explains them together. Every key is "
        "optional; an unknown one is refused with one line naming it.",
        "",
    ]
    repo_sections = set(PatchitConfig.model_fields)
    for section, field in DeploymentConfig.model_fields.items():
        model = field.annotation
        deployment_only = section not in repo_sections
        lines += [f"## [{section}] {{ #{section} }}", ""]
        if deployment_only:
            lines += ["In `$PATCHIT_HOME/patchit.toml` only.", ""]
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            lines += [
                f"`{section}`: {_type_name(model)}. " + _cell(field.description or ""),
                "",
                'A table of `"remote URL" = "/path/to/checkout"` or '
                '`"bundle:NAME" = "/path/to/checkout"` entries: where this host\'s clone of '
                "each repository, or of each Airflow DAG bundle, is.",
                "",
            ]
            continue
        if model.__doc__ and model.__doc__ is not BaseModel.__doc__:
            lines += [_help(model.__doc__), ""]
        lines += [
            "| setting | type | default | limits | who sets it | what it does |",
            "|---|---|---|---|---|---|",
        ]
        for name, sub in model.model_fields.items():
            default = sub.get_default(call_default_factory=True)
            lines.append(
                f"| `{name}` {{ #{section}.{name} }} | {_type_name(sub.annotation)} | "
                f"`{_toml(default)}` | {_limits(sub)} | "
                f"{_who(section, name, deployment_only)} | {_cell(sub.description or '')} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def setting_names() -> list[str]:
    """`section.name` of every setting, the list the reference must cover."""
    from patchit.config import DeploymentConfig

    names: list[str] = []
    for section, field in DeploymentConfig.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            names += [f"{section}.{name}" for name in model.model_fields]
        else:
            names.append(section)
    return names


def _schema_page(title: str, intro: str, schema: dict[str, Any]) -> str:
    lines = [f"# {title}", "", intro, ""]
    lines += ["| field | type | required | what it holds |", "|---|---|---|---|"]
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or " | ".join(
            str(p.get("type") or p.get("$ref", "").rsplit("/", 1)[-1])
            for p in prop.get("anyOf", [prop])
        )
        if "$ref" in prop:
            kind = prop["$ref"].rsplit("/", 1)[-1]
        lines.append(
            f"| `{name}` | {_cell(str(kind))} | {'yes' if name in required else ''} | "
            f"{_cell(prop.get('description', ''))} |"
        )
    lines += ["", "The JSON schema itself:", "", "```json", json.dumps(schema, indent=2), "```"]
    return "\n".join(lines) + "\n"


def event_schema_reference() -> str:
    from patchit.events.model import SCHEMA_VERSION, event_json_schema

    return _schema_page(
        "The failure event",
        "`UniversalFailureEvent`, what every intake (the dbt wrapper, the Airflow callback, "
        f"`patchit airflow scan`, an event file) turns a failure into. Schema version "
        f"{SCHEMA_VERSION}; `patchit schema` prints the same JSON schema, and `patchit heal "
        "EVENT.json` takes a file that conforms to it. Generated from `patchit/events/model.py`.",
        event_json_schema(),
    )


def report_schema_reference() -> str:
    from patchit.cli.main import INCIDENT_FIELDS
    from patchit.reports.model import RootCauseReport

    page = _schema_page(
        "The report",
        "`RootCauseReport`, written for every incident as `$PATCHIT_HOME/reports/<id>.json` "
        "(beside the `.md` and `.html` renderings of it) and printed by `patchit report ID "
        "--format json`. Generated from `patchit/reports/model.py`.",
        RootCauseReport.model_json_schema(),
    )
    fields = ", ".join(f"`{name}`" for name in INCIDENT_FIELDS)
    return page + (
        "\n## `patchit incidents --json`\n\nA list of objects, newest first, each with at least "
        f"these keys: {fields}.\n"
    )


def bench_page(source: str, title: str, intro: str) -> str:
    body = (ROOT / "benchmarks" / "results" / source).read_text(encoding="utf-8")
    return f"# {title}\n\n{intro}\n\n" + body.replace("\n- ", "\n\n- ", 1)


def generated_pages() -> dict[str, str]:
    """Every generated page: its path under docs/ -> its Markdown."""
    pages = {
        "reference/cli.md": cli_reference(),
        "reference/settings.md": settings_reference(),
        "reference/event-schema.md": event_schema_reference(),
        "reference/report-schema.md": report_schema_reference(),
    }
    for page, (source, title, intro) in BENCH_PAGES.items():
        pages[page] = bench_page(source, title, intro)
    # the corpus's own README, which tests/bench/test_corpus_model.py keeps complete
    pages["benchmarks/format.md"] = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    return pages


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, content in generated_pages().items():
        files.append(File.generated(config, path, content=content))
    return files
