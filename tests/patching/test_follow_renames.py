"""The fix-its follow a rename the breaking change made to every call site it left behind:
a model file (`dbt_fix_ref`), a macro (`dbt_fix_macro`), a helper's parameter
(`python_fix_call`). Real git and, for Python, a real traceback; no dbt, no Airflow."""

from __future__ import annotations

import textwrap
from pathlib import Path

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.fixits.macros import FixMacroStrategy
from patchit.patching.fixits.python_calls import FixCallStrategy
from patchit.patching.fixits.refs import FixRefStrategy
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo, run_script, script_failure

PROJECT = {
    "dbt_project.yml": "name: shop\nprofile: shop\nconfig-version: 2\n",
    "macros/money.sql": (
        "{% macro cents_to_dollars(column) -%}\n    round({{ column }} / 100.0, 2)\n"
        "{%- endmacro %}\n"
    ),
    "models/staging/stg_orders.sql": "select order_id, amount_cents from {{ ref('raw_orders') }}\n",
    "models/marts/orders.sql": (
        "select order_id, {{ cents_to_dollars('amount_cents') }} as amount\n"
        "from {{ ref('stg_orders') }}\n"
    ),
    "models/marts/order_totals.sql": (
        "select sum({{ cents_to_dollars('amount_cents') }}) as total\n"
        "from {{ ref('stg_orders') }}\n"
    ),
    "models/marts/schema.yml": (
        "version: 2\nmodels:\n  - name: orders\n    columns:\n      - name: order_id\n"
        "        data_tests:\n          - relationships:\n              arguments:\n"
        "                to: ref('stg_orders')\n                field: order_id\n"
    ),
    "seeds/raw_orders.csv": "order_id,amount_cents\n1,250\n",
}


def dbt_repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "shop")
    for rel, text in PROJECT.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit_all(repo, "good")
    return repo


def dbt_evidence(repo: Path, unit: str, message: str, unit_path: str | None) -> Evidence:
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id=f"model.shop.{unit}",
        unit_path=unit_path, status="error", error_type="Compilation Error",
        error_message=message, repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"),
        dbt=DbtInvocation(command="build", project_dir=str(repo), cwd=str(repo)),
    )  # fmt: skip
    return Evidence(event=event, repo_root=str(repo), project_dir="", unit_path=unit_path,
                    error=message)  # fmt: skip


def test_a_renamed_model_is_followed_in_every_ref(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    git(repo, "mv", "models/staging/stg_orders.sql", "models/staging/stg_shopify_orders.sql")
    commit_all(repo, "staging: name models by source system")
    message = (
        "Compilation Error\n  Model 'model.shop.orders' (models/marts/orders.sql) depends on a "
        "node named 'stg_orders' which was not found"
    )
    (candidate,) = FixRefStrategy().fix(dbt_evidence(repo, "orders", message, None), [])
    assert sorted(e.path for e in candidate.edits) == [
        "models/marts/order_totals.sql", "models/marts/orders.sql", "models/marts/schema.yml"
    ]  # fmt: skip
    assert "renamed models/staging/stg_orders.sql to" in candidate.rationale
    apply_edits(repo, candidate.edits)
    assert "stg_orders'" not in "".join(p.read_text() for p in (repo / "models").rglob("*.*"))


def test_a_ref_typo_with_no_rename_in_the_change_is_left_to_the_near_name(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    orders = repo / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text().replace("ref('stg_orders')", "ref('stg_order')"))
    commit_all(repo, "orders: typo")
    message = (
        "Compilation Error\n  Model 'model.shop.orders' (models/marts/orders.sql) depends on a "
        "node named 'stg_order' which was not found"
    )
    (candidate,) = FixRefStrategy().fix(dbt_evidence(repo, "orders", message, None), [])
    assert [e.path for e in candidate.edits] == ["models/marts/orders.sql"]
    assert "only near name" in candidate.rationale


def test_a_renamed_macro_is_followed_in_every_call_whatever_its_spelling(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    money = repo / "macros" / "money.sql"
    money.write_text(money.read_text().replace("cents_to_dollars", "usd_from_minor_units"))
    orders = repo / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text().replace("cents_to_dollars", "usd_from_minor_units"))
    commit_all(repo, "money: a clearer macro name")
    message = (
        "Compilation Error in model order_totals (models/marts/order_totals.sql)\n"
        "  'cents_to_dollars' is undefined. This can happen when calling a macro that does not "
        'exist. Check for typos and/or install package dependencies with "dbt deps".'
    )
    evidence = dbt_evidence(repo, "order_totals", message, "models/marts/order_totals.sql")
    (candidate,) = FixMacroStrategy().fix(evidence, [])
    assert [e.path for e in candidate.edits] == ["models/marts/order_totals.sql"]
    assert "{{ usd_from_minor_units('amount_cents') }}" in candidate.edits[0].replace
    assert "renamed the macro 'cents_to_dollars' to 'usd_from_minor_units'" in candidate.rationale


def test_a_renamed_macro_called_package_style_follows_under_the_project_name(
    tmp_path: Path,
) -> None:
    repo = dbt_repo(tmp_path)
    money = repo / "macros" / "money.sql"
    money.write_text(money.read_text().replace("cents_to_dollars", "to_dollars"))
    for name in ("orders", "order_totals"):
        mart = repo / "models" / "marts" / f"{name}.sql"
        mart.write_text(mart.read_text().replace("cents_to_dollars", "shop.cents_to_dollars"))
    commit_all(repo, "money: package-style calls; cents_to_dollars is to_dollars")
    message = (
        "Compilation Error in model orders (models/marts/orders.sql)\n"
        "  'dict object' has no attribute 'cents_to_dollars'. This can happen when calling a "
        "macro that does not exist. Check for typos and/or install package dependencies with "
        '"dbt deps".'
    )
    evidence = dbt_evidence(repo, "orders", message, "models/marts/orders.sql")
    (candidate,) = FixMacroStrategy().fix(evidence, [])
    assert sorted(e.path for e in candidate.edits) == [
        "models/marts/order_totals.sql", "models/marts/orders.sql"
    ]  # fmt: skip
    apply_edits(repo, candidate.edits)
    orders = (repo / "models" / "marts" / "orders.sql").read_text()
    assert "{{ shop.to_dollars('amount_cents') }}" in orders  # the package-style call kept
    assert "macro to_dollars(" in money.read_text()  # the rename kept


def test_another_packages_macro_is_not_the_projects_rename(tmp_path: Path) -> None:
    repo = dbt_repo(tmp_path)
    money = repo / "macros" / "money.sql"
    money.write_text(money.read_text().replace("cents_to_dollars", "to_dollars"))
    orders = repo / "models" / "marts" / "orders.sql"
    called = orders.read_text().replace("cents_to_dollars", "money_utils.cents_to_dollars")
    orders.write_text(called)
    commit_all(repo, "money: the package's macro")
    message = (
        "Compilation Error in model orders (models/marts/orders.sql)\n"
        "  'dict object' has no attribute 'cents_to_dollars'. This can happen when calling a "
        "macro that does not exist."
    )
    evidence = dbt_evidence(repo, "orders", message, "models/marts/orders.sql")
    (candidate,) = FixMacroStrategy().fix(evidence, [])
    # the project's own bare call follows; the other package's call is left as written
    assert [e.path for e in candidate.edits] == ["models/marts/order_totals.sql"]
    assert "money_utils.cents_to_dollars" in orders.read_text()


LIB = textwrap.dedent(
    """\
    def totals(amounts, rates, currency="EUR"):
        if currency != "EUR":
            raise ValueError(currency)
        return round(sum(a * rates[c] for c, a in amounts), 2)
    """
)
JOB = textwrap.dedent(
    """\
    from lib import totals

    RATES = {"EUR": 1.0, "USD": 0.5}


    def daily():
        return totals([("EUR", 2), ("USD", 4)], RATES, currency="EUR")


    def weekly():
        return totals([("USD", 8)], rates=RATES, currency="EUR")


    print(daily(), weekly())
    """
)


def test_a_renamed_parameter_is_followed_at_every_call_passing_the_old_keyword(
    tmp_path: Path,
) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "jobs").mkdir()
    (repo / "jobs" / "lib.py").write_text(LIB)
    (repo / "jobs" / "job.py").write_text(JOB.replace(', currency="EUR"', ""))
    commit_all(repo, "good")
    assert run_script(repo, "jobs/job.py").returncode == 0
    renamed = LIB.replace("currency", "reporting_currency")
    (repo / "jobs" / "lib.py").write_text(renamed)
    event = script_failure(repo, "jobs/job.py", JOB, "daily")  # the same commit
    assert "totals() got an unexpected keyword argument 'currency'" in event.error_message
    evidence = gather_airflow_evidence(event, repo)
    (candidate,) = FixCallStrategy().fix(evidence, [])
    assert [e.path for e in candidate.edits] == ["jobs/job.py"]
    assert candidate.edits[0].replace.count("reporting_currency=") == 2
    assert "parameter currency to reporting_currency" in candidate.rationale
    apply_edits(repo, candidate.edits)
    assert run_script(repo, "jobs/job.py").returncode == 0


def test_a_keyword_typo_with_no_rename_in_the_change_keeps_the_near_name(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "jobs").mkdir()
    (repo / "jobs" / "lib.py").write_text(LIB)
    commit_all(repo, "good")
    event = script_failure(repo, "jobs/job.py", JOB.replace("currency=", "curency="), "daily")
    (candidate,) = FixCallStrategy().fix(gather_airflow_evidence(event, repo), [])
    assert "renamed curency= -> currency=" in candidate.rationale
