"""FollowMessageStrategy on real failures: dbt's "has been replaced by" (a dbt_utils-shaped
package in dbt_packages), DuckDB's `Did you mean "x"`, a Jinja undefined macro, and Python
3.11's `Did you mean: 'x'?`, each applied wherever the breaking change used the old name."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.gitlog import added_lines, breaking_diff, changed_files
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import PatchCandidate, Strategy
from patchit.patching.fixits.message import FollowMessageStrategy
from tests.conftest import commit_all, git, run_dbt
from tests.evidence.airflow_failures import init_repo, run_script, script_failure
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import Broken, break_project, copy_project, make_evidence

# A package shaped like dbt_utils 1.x: the removed macro raises the replacement's name.
UTILS_PROJECT = 'name: dbt_utils\nversion: "1.3.0"\nconfig-version: 2\nmacro-paths: ["macros"]\n'
UTILS_KEYS = """{%- macro surrogate_key(field_list) -%}
{%- set error_message = '
Warning: `dbt_utils.surrogate_key` has been replaced by \\
`dbt_utils.generate_surrogate_key`. The new macro treats null values \\
differently to empty strings. The {}.{} model triggered this warning. \\
'.format(model.package_name, model.name) -%}
{%- do exceptions.raise_compiler_error(error_message) -%}
{%- endmacro -%}

{%- macro generate_surrogate_key(field_list) -%}
md5({% for f in field_list %}coalesce(cast({{ f }} as varchar), '_null_')
{%- if not loop.last %} || '-' || {% endif %}{% endfor %})
{%- endmacro -%}
"""
KEYED = {  # three models switched to the removed macro by one commit
    "models/staging/stg_payments.sql": (
        "    order_id,\n",
        "    order_id,\n    {{ dbt_utils.surrogate_key(['order_id', 'payment_method']) }} as pk,\n",
    ),
    "models/staging/stg_orders.sql": (
        "    status\n",
        "    status,\n    {{ dbt_utils.surrogate_key(['id']) }} as order_key\n",
    ),
    "models/marts/daily_revenue.sql": (
        "    order_date,\n",
        "    order_date,\n    {{ dbt_utils.surrogate_key(['order_date']) }} as day_key,\n",
    ),
}
DUCKDB_TYPO = {  # one commit misspells a function in two models
    "models/marts/daily_revenue.sql": (
        "    sum(amount) as revenue\n",
        "    sum(amount) as revenue,\n    max(date_trnc('day', order_date)) as day_start\n",
    ),
    "models/marts/customer_segments.sql": (
        "    lifetime_value,\n",
        "    lifetime_value,\n    date_trnc('day', current_date) as as_of,\n",
    ),
}
TABLE_TYPO = {
    "models/marts/customer_segments.sql": (
        "from {{ ref('customers') }}",
        "from {{ ref('customers') }}\nwhere customer_id in (select customer_id from ordrs)",
    )
}


def with_packages(built: Path, dest: Path) -> Path:
    """The built example project with the dbt_utils-shaped package installed."""
    project = copy_project(built, dest)
    package = project / "dbt_packages" / "dbt_utils"
    (package / "macros").mkdir(parents=True)
    (package / "dbt_project.yml").write_text(UTILS_PROJECT)
    (package / "macros" / "keys.sql").write_text(UTILS_KEYS)
    return project


def with_history(broken: Broken, changes: dict[str, tuple[str, str]], dest: Path) -> Path:
    """A git repo of the broken project whose last commit is the breaking change."""
    repo = copy_project(broken.project, dest)
    (repo / ".gitignore").write_text("target/\nlogs/\n*.duckdb\n*.duckdb.wal\ndbt_packages/\n")
    broken_texts = {rel: (repo / rel).read_text() for rel in changes}
    for rel, (old, new) in changes.items():
        (repo / rel).write_text(broken_texts[rel].replace(new, old))
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "good")
    for rel, text in broken_texts.items():
        (repo / rel).write_text(text)
    commit_all(repo, "the breaking change")
    return repo


def dbt_evidence(repo: Path, message: str, unit: str, path: str, error_type: str) -> Evidence:
    evidence = make_evidence(
        repo, message, unit_id=f"model.shop.{unit}", unit_path=path, error_type=error_type
    )
    evidence.changed_files = changed_files(repo, None, "HEAD")
    evidence.breaking_diff = breaking_diff(repo, None, "HEAD")
    return evidence


@pytest.fixture(scope="session")
def replaced(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    base = tmp_path_factory.mktemp("utils")
    prepared = with_packages(built_shop, base / "prepared")
    broken = break_project(prepared, base / "shop", KEYED, "build")
    assert broken.returncode == 2, broken.output[-2000:]
    return broken


@pytest.fixture(scope="session")
def runtime_typos(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    dest = tmp_path_factory.mktemp("typos") / "shop"
    broken = break_project(built_shop, dest, DUCKDB_TYPO, "run", "--select", "marts")
    assert broken.returncode == 1, broken.output[-2000:]
    return broken


@pytest.fixture(scope="session")
def table_typo(built_shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Broken:
    dest = tmp_path_factory.mktemp("table") / "shop"
    broken = break_project(built_shop, dest, TABLE_TYPO, "run", "--select", "customer_segments")
    assert broken.returncode == 1, broken.output[-2000:]
    return broken


def replaced_evidence(broken: Broken) -> Evidence:
    return make_evidence(
        broken.project,
        broken.parse_error(),
        unit_id="model.shop.stg_payments",
        unit_path="models/staging/stg_payments.sql",
        error_type="Compilation Error",
    )


def propose(evidence: Evidence) -> list[PatchCandidate]:
    return FollowMessageStrategy().fix(evidence, [])


class TestFollowMessageContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return FollowMessageStrategy()

    @pytest.fixture
    def evidence(self, replaced: Broken) -> Evidence:
        return replaced_evidence(replaced)

    @pytest.fixture
    def unrelated_evidence(self, staging_broken: Broken) -> Evidence:
        message = staging_broken.node_messages["model.shop.stg_customers"]  # Binder Error
        return make_evidence(
            staging_broken.project,
            message,
            unit_id="model.shop.stg_customers",
            unit_path="models/staging/stg_customers.sql",
            error_type="Runtime Error",
        )


# -- dbt: "has been replaced by" ------------------------------------------------------------


def test_the_replaced_message_is_the_one_dbt_utils_gives(replaced: Broken) -> None:
    error = replaced.parse_error()
    assert error.startswith("Compilation Error in model ")
    assert (
        "Warning: `dbt_utils.surrogate_key` has been replaced by "
        "`dbt_utils.generate_surrogate_key`. The new macro treats null values differently"
    ) in error


def test_a_replaced_macro_is_renamed_in_every_model(replaced: Broken) -> None:
    (candidate,) = propose(replaced_evidence(replaced))
    assert sorted(e.path for e in candidate.edits) == sorted(KEYED)
    for edit in candidate.edits:
        assert "dbt_utils.generate_surrogate_key(" in edit.replace
        assert "surrogate_key" not in edit.replace.replace("generate_surrogate_key", "")
    assert candidate.tag == "follow_message"
    assert "has been replaced" not in candidate.rationale  # says it in its own words
    assert "'dbt_utils.generate_surrogate_key'" in candidate.rationale


@pytest.mark.slow
def test_the_renamed_project_builds(replaced: Broken, tmp_path: Path) -> None:
    (candidate,) = propose(replaced_evidence(replaced))
    project = copy_project(replaced.project, tmp_path / "shop")
    apply_edits(project, candidate.edits)
    res = run_dbt(project, "build")
    assert res.returncode == 0, res.stdout[-3000:]


def test_a_replacement_that_is_not_installed_proposes_nothing(
    replaced: Broken, tmp_path: Path
) -> None:
    project = copy_project(replaced.project, tmp_path / "shop")
    shutil.rmtree(project / "dbt_packages")
    evidence = replaced_evidence(replaced).model_copy(update={"repo_root": str(project)})
    assert propose(evidence) == []


# -- DuckDB: Did you mean "x" -----------------------------------------------------------------


def test_a_misspelt_function_is_renamed_wherever_the_change_used_it(
    runtime_typos: Broken, tmp_path: Path
) -> None:
    message = runtime_typos.node_messages["model.shop.daily_revenue"]
    assert "Catalog Error: Scalar Function with name date_trnc does not exist!" in message
    assert 'Did you mean "date_trunc"?' in message
    repo = with_history(runtime_typos, DUCKDB_TYPO, tmp_path / "repo")
    path = "models/marts/daily_revenue.sql"
    evidence = dbt_evidence(repo, message, "daily_revenue", path, "Runtime Error")
    (candidate,) = propose(evidence)
    assert sorted(e.path for e in candidate.edits) == sorted(DUCKDB_TYPO)  # both models
    assert all("date_trunc('day'" in e.replace for e in candidate.edits)


def test_without_a_breaking_diff_only_the_failing_file_is_edited(runtime_typos: Broken) -> None:
    message = runtime_typos.node_messages["model.shop.daily_revenue"]
    path = "models/marts/daily_revenue.sql"
    evidence = make_evidence(
        runtime_typos.project, message, unit_id="model.shop.daily_revenue", unit_path=path,
        error_type="Runtime Error",
    )  # fmt: skip
    (candidate,) = propose(evidence)
    assert [e.path for e in candidate.edits] == [path]


SEGMENTS = "models/marts/customer_segments.sql"


def test_a_misspelt_table_is_renamed_to_the_project_relation(table_typo: Broken) -> None:
    message = table_typo.node_messages["model.shop.customer_segments"]
    assert 'Table with name ordrs does not exist!\n  Did you mean "orders"?' in message
    evidence = make_evidence(
        table_typo.project, message, unit_id="model.shop.customer_segments",
        unit_path=SEGMENTS, error_type="Runtime Error",
    )  # fmt: skip
    (candidate,) = propose(evidence)
    assert "(select customer_id from orders)" in candidate.edits[0].replace


def test_a_suggested_table_that_is_not_the_projects_proposes_nothing(table_typo: Broken) -> None:
    message = table_typo.node_messages["model.shop.customer_segments"]
    evidence = make_evidence(
        table_typo.project, message.replace('"orders"?', '"ord"?'),
        unit_id="model.shop.customer_segments", unit_path=SEGMENTS, error_type="Runtime Error",
    )  # fmt: skip
    assert propose(evidence) == []


def test_duckdb_suggesting_a_far_name_proposes_nothing(runtime_typos: Broken) -> None:
    # DuckDB always names its nearest function, however far: `sum_no_nulls` -> `sum_no_overflow`
    message = runtime_typos.node_messages["model.shop.daily_revenue"]
    message = message.replace("date_trnc", "sum_no_nulls")
    message = message.replace('"date_trunc"', '"sum_no_overflow"')
    evidence = make_evidence(
        runtime_typos.project, message, unit_id="model.shop.daily_revenue",
        unit_path="models/marts/daily_revenue.sql", error_type="Runtime Error",
    )  # fmt: skip
    assert propose(evidence) == []


# -- dbt: a Jinja undefined with exactly one near macro -------------------------------------


def test_an_undefined_macro_with_one_near_name_is_renamed(staging_broken: Broken) -> None:
    evidence = make_evidence(
        staging_broken.project,
        staging_broken.node_messages["model.shop.stg_payments"],
        unit_id="model.shop.stg_payments",
        unit_path="models/staging/stg_payments.sql",
        error_type="Compilation Error",
    )
    (candidate,) = propose(evidence)
    assert "{{ cents_to_dollars('amount_cents') }}" in candidate.edits[0].replace


def test_two_near_macros_propose_nothing(staging_broken: Broken, tmp_path: Path) -> None:
    project = copy_project(staging_broken.project, tmp_path / "shop")
    (project / "macros" / "cents.sql").write_text(
        "{% macro cents_to_dollar(c) %}{{ c }}{% endmacro %}\n"  # also one letter away
    )
    evidence = make_evidence(
        project,
        staging_broken.node_messages["model.shop.stg_payments"],
        unit_id="model.shop.stg_payments",
        unit_path="models/staging/stg_payments.sql",
        error_type="Compilation Error",
    )
    assert propose(evidence) == []


# -- Python 3.11: Did you mean: 'x'? ----------------------------------------------------------

GOOD_JOB = textwrap.dedent(
    """\
    import csv
    import io


    def rows(text):
        return list(csv.DictReader(io.StringIO(text)))


    def header(text):
        return csv.DictReader(io.StringIO(text)).fieldnames


    print(len(rows("a,b\\n1,2\\n")), header("a,b\\n"))
    """
)


def test_a_library_module_attribute_is_renamed_at_every_changed_use(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "jobs").mkdir()
    (repo / "jobs/load.py").write_text(GOOD_JOB)
    commit_all(repo, "load: read rows")
    event = script_failure(repo, "jobs/load.py", GOOD_JOB.replace("DictReader", "DictReadr"),
                           "load")  # fmt: skip
    assert event.error_message.endswith(
        "module 'csv' has no attribute 'DictReadr'. Did you mean: 'DictReader'?"
    )
    evidence = gather_airflow_evidence(event, repo)
    assert added_lines(evidence.breaking_diff)["jobs/load.py"] == {6, 10}
    (candidate,) = propose(evidence)
    apply_edits(repo, candidate.edits)
    done = run_script(repo, "jobs/load.py")
    assert done.returncode == 0 and done.stdout.strip() == "1 ['a', 'b']"


PATH_JOB = textwrap.dedent(
    """\
    import pathlib
    import sys


    def save(folder, text):
        path = pathlib.Path(folder) / "out.txt"
        path.write_txt(text)
        return path.read_text()


    print(save(sys.argv[1] if len(sys.argv) > 1 else ".", "done"))
    """
)


def test_an_attribute_only_the_runtime_knows_follows_pythons_suggestion(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/save.py", PATH_JOB, "save")
    assert "'PosixPath' object has no attribute 'write_txt'. Did you mean: 'write_text'?" in (
        event.error_message
    )
    (candidate,) = propose(gather_airflow_evidence(event, repo))
    assert candidate.edits[0].replace == "    path.write_text(text)\n"
    # an Airflow callback's message is str(exc): the suggestion is only in the traceback
    plain = event.error_message.split(". Did you mean")[0]
    callback = event.model_copy(update={"error_message": plain})
    assert propose(gather_airflow_evidence(callback, repo)) == [candidate]


NAME_JOB = textwrap.dedent(
    """\
    def report(rows):
        amount_total = sum(rows)
        return amount_totl * 2


    print(report([1, 2]))
    """
)


def test_a_name_error_follows_the_suggestion_in_scope(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/report.py", NAME_JOB, "report")
    assert event.error_message.endswith("Did you mean: 'amount_total'?")
    (candidate,) = propose(gather_airflow_evidence(event, repo))
    apply_edits(repo, candidate.edits)
    assert run_script(repo, "jobs/report.py").stdout.strip() == "6"


TIE_JOB = textwrap.dedent(
    """\
    class Invoice:
        def __init__(self, cents):
            self.amount_net = cents
            self.amount_vat = cents * 19 // 100


    print(Invoice(100).amount_nat)
    """
)

DUMP_JOB = 'import json\n\nprint(json.dumsp({"a": 1}))\n'


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (TIE_JOB, "Did you mean: 'amount_net'?"),  # amount_vat is exactly as near
        (DUMP_JOB, "Did you mean: 'dump'?"),  # json.dumps is near too, and is what was meant
    ],
    ids=["repo-class-tie", "library-module"],
)
def test_a_suggestion_with_a_second_near_name_proposes_nothing(
    tmp_path: Path, source: str, said: str
) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/job.py", source, "job")
    assert event.error_message.endswith(said)
    assert propose(gather_airflow_evidence(event, repo)) == []
