"""The policy and a candidate that follows a rename: its sites count as one edit kind against
`max_files`, `max_rename_sites` caps them, and the declaration is checked, not trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import PolicyConfig
from patchit.patching.base import Edit, PatchCandidate
from patchit.policy import check_policy
from patchit.policy.renames import is_rename_site

MART = "select\n    o.status,\n    count(*) as n\nfrom {{ ref('stg_orders') }} as o\ngroup by 1\n"
SITE = ("    o.status,\n", "    o.order_status as status,\n")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for n in range(6):
        path = tmp_path / f"models/m{n}.sql"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(MART)
    return tmp_path


def candidate(
    n: int, follows: dict[str, str], extra: tuple[str, str] | None = None
) -> PatchCandidate:
    edits = [Edit(path=f"models/m{i}.sql", search=SITE[0], replace=SITE[1]) for i in range(n)]
    if extra is not None:
        edits.append(Edit(path="models/m0.sql", search=extra[0], replace=extra[1]))
    return PatchCandidate(strategy="t", tag="t", edits=edits, rationale="t", follows=follows)


def test_the_sites_of_one_rename_count_as_one_file(repo: Path) -> None:
    assert check_policy(candidate(5, {"status": "order_status"}), repo, PolicyConfig()) is None
    # the same edits without the declaration are five files
    reason = check_policy(candidate(5, {}), repo, PolicyConfig())
    assert reason == "touches 5 files, more than max_files=3"


def test_max_rename_sites_caps_how_far_a_rename_is_followed(repo: Path) -> None:
    policy = PolicyConfig(max_rename_sites=4)
    reason = check_policy(candidate(5, {"status": "order_status"}), repo, policy)
    assert reason == "follows status to 5 files, more than max_rename_sites=4"
    assert PolicyConfig().max_rename_sites == 50


def test_a_site_with_any_other_change_counts_as_a_file_of_its_own(repo: Path) -> None:
    sneaky = candidate(5, {"status": "order_status"}, extra=("group by 1", "group by 1, 2"))
    assert check_policy(sneaky, repo, PolicyConfig()) is None  # 1 file + 1 rename
    assert check_policy(sneaky, repo, PolicyConfig(max_files=1)) == (
        "touches 2 files, more than max_files=1 (the 4 sites of its renames count as 1)"
    )


def test_max_lines_holds_for_the_largest_site(repo: Path) -> None:
    assert (
        check_policy(candidate(6, {"status": "order_status"}), repo, PolicyConfig(max_lines=2))
        is None
    )
    assert check_policy(candidate(6, {"status": "order_status"}), repo, PolicyConfig(max_lines=1))


@pytest.mark.parametrize(
    ("before", "after", "site"),
    [
        ("o.status,", "o.order_status as status,", True),
        ("where status = 1", "where order_status = 1", True),
        ("  - name: status\n", "  - name: order_status\n", True),
        ("where status = 1", "where order_status = 2", False),  # another change too
        ("select status", "select order_status, amount", False),  # a column added
        ("select status", "select status", False),  # no change is no site
    ],
)
def test_what_counts_as_a_rename_site(before: str, after: str, site: bool) -> None:
    assert is_rename_site(before, after, {"status": "order_status"}) is site


def test_a_macro_renamed_in_five_models_is_one_candidate_the_policy_allows(
    tmp_path: Path,
) -> None:
    from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
    from patchit.evidence.model import Evidence
    from patchit.patching.fixits.macros import FixMacroStrategy
    from tests.conftest import commit_all, git
    from tests.evidence.airflow_failures import init_repo

    repo = init_repo(tmp_path / "shop")
    (repo / "dbt_project.yml").write_text("name: shop\nprofile: shop\nconfig-version: 2\n")
    (repo / "macros").mkdir()
    macro = "{% macro cents_to_dollars(c) -%}\n    round({{ c }} / 100.0, 2)\n{%- endmacro %}\n"
    (repo / "macros/money.sql").write_text(macro)
    (repo / "models").mkdir()
    for n in range(5):
        (repo / f"models/m{n}.sql").write_text(f"select {{{{ cents_to_dollars('a{n}') }}}} as x\n")
    commit_all(repo, "good")
    (repo / "macros/money.sql").write_text(macro.replace("cents_to_dollars", "to_dollars"))
    commit_all(repo, "money: to_dollars")
    message = (
        "Compilation Error in model m0 (models/m0.sql)\n  'cents_to_dollars' is undefined. "
        "This can happen when calling a macro that does not exist."
    )
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.m0",
        unit_path="models/m0.sql", status="error", error_type="Compilation Error",
        error_message=message, repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"),
        dbt=DbtInvocation(command="build", project_dir=str(repo), cwd=str(repo)),
    )  # fmt: skip
    evidence = Evidence(event=event, repo_root=str(repo), project_dir="",
                        unit_path="models/m0.sql", error=message)  # fmt: skip
    (candidate,) = FixMacroStrategy().fix(evidence, [])
    assert len({e.path for e in candidate.edits}) == 5
    assert candidate.follows == {"cents_to_dollars": "to_dollars"}
    assert check_policy(candidate, repo, PolicyConfig()) is None
