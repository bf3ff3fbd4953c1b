"""The generated reference covers the code: every command, every setting (fast: no mkdocs build).

The pages come from `docs/hooks/reference.py`, which walks the click tree and the pydantic
config; these tests hold it to the same lists the CLI and the config define, so a command or a
setting it skipped (hidden, nested, of a new kind) is a failure, not a page that quietly lacks
it. `test_site.py` builds the site and checks the same in its HTML.
"""

from __future__ import annotations

import re

import pytest

from patchit.config import DeploymentConfig
from tests.cli.test_docs import COMMANDS
from tests.conftest import ROOT
from tests.docs.reference_hook import load_hook

HOOK = load_hook()
CLI_PAGE = HOOK.cli_reference()
SETTINGS_PAGE = HOOK.settings_reference()


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_has_a_section(path: str) -> None:
    heading = re.compile(rf"^#+ {re.escape(path)} \{{ #{re.escape(path.replace(' ', '-'))} ", re.M)
    assert heading.search(CLI_PAGE), f"the commands reference lacks `{path}`"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_option_is_in_its_section(path: str) -> None:
    section = CLI_PAGE.split(f" {path} {{ #", 1)[1].split("\n#", 1)[0]
    for param in COMMANDS[path].params:
        if not getattr(param, "hidden", False) and param.param_type_name == "option":
            assert f"`{param.opts[0]}`" in section, f"{path}: {param.opts[0]} is not documented"


def test_every_setting_has_a_row() -> None:
    names = HOOK.setting_names()
    known = {"policy.max_files", "sandbox.pg_role", "state.url", "repos", "worker.max_crashes"}
    assert known <= set(names)
    for name in names:
        anchor = f"{{ #{name} }}"
        assert anchor in SETTINGS_PAGE, f"the settings reference lacks {name}"


def test_every_setting_says_what_it_does() -> None:
    # the reference's "what it does" column is the field's description: an empty cell is a
    # setting a reader cannot use without reading the code
    for section, field in DeploymentConfig.model_fields.items():
        model = field.annotation
        fields = getattr(model, "model_fields", {section: field})
        for name, sub in fields.items():
            assert sub.description, f"[{section}] {name} has no description in patchit/config.py"


def test_who_sets_it_follows_the_settings_rules() -> None:
    row = next(line for line in SETTINGS_PAGE.splitlines() if "{ #delivery.api_url }" in line)
    assert "| operator |" in row
    row = next(line for line in SETTINGS_PAGE.splitlines() if "{ #notify.webhook_url }" in line)
    assert "`PATCHIT_WEBHOOK_URL`" in row
    row = next(line for line in SETTINGS_PAGE.splitlines() if "{ #delivery.mode }" in line)
    assert "may only narrow" in row
    row = next(line for line in SETTINGS_PAGE.splitlines() if "{ #worker.max_crashes }" in line)
    assert "$PATCHIT_HOME/patchit.toml" in row


def test_schemas_are_the_code_s() -> None:
    from patchit.events.model import UniversalFailureEvent
    from patchit.reports.model import RootCauseReport

    pages = HOOK.generated_pages()
    for page, model in (
        ("reference/event-schema.md", UniversalFailureEvent),
        ("reference/report-schema.md", RootCauseReport),
    ):
        for name in model.model_fields:
            assert f"| `{name}` |" in pages[page], f"{page} lacks {name}"


def test_benchmark_pages_hold_the_bench_s_tables() -> None:
    pages = HOOK.generated_pages()
    for page, (source, _, _) in HOOK.BENCH_PAGES.items():
        table = (ROOT / "benchmarks" / "results" / source).read_text(encoding="utf-8")
        last_row = table.strip().splitlines()[-1]
        assert last_row in pages[page], f"{page} lacks the last row of {source}"


def test_every_docs_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    written = {str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md")}
    generated = set(HOOK.generated_pages())
    for page in sorted(written | generated):
        assert f" {page}\n" in nav, f"docs/{page} is not in mkdocs.yml's nav"


def test_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200, "README.md is the front door: under 200 lines"
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).is_file(), f"README.md links {target}, which does not exist"
    for heading in ("## The two commands", "## Configuration", "## Commands", "## Performance"):
        assert heading in readme, f"README.md lacks {heading!r}"
