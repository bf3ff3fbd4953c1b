"""The breaking change's intents, read from real commits in a real git repository (no dbt)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.intents import Intent, change_intents, one_slip, read_intents
from patchit.evidence.model import Evidence
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo

STG = textwrap.dedent(
    """\
    select
        subscription_id,
        account_id,
        plan_code,
        cast(seats as int) as seats,
        cast(started_on as date) as started_on
    from {{ ref('raw_subscriptions') }}
    where status != 'trial'
    """
)
MART = textwrap.dedent(
    """\
    with active as (
        select * from {{ ref('stg_subscriptions') }}
        where started_on <= date '2025-10-31'
    )
    select
        active.plan_code,
        count(*) as subscriptions,
        {{ cents_to_dollars('sum(active.seats)') }} as seats_usd
    from active
    group by active.plan_code
    """
)
MONEY = (
    "{% macro cents_to_dollars(column) -%}\n    round({{ column }} / 100.0, 2)\n{%- endmacro %}\n"
)
SCHEMA = textwrap.dedent(
    """\
    version: 2
    models:
      - name: stg_subscriptions
        columns:
          - name: subscription_id
            tests: [unique, not_null]
          - name: plan_code
            description: the plan
    """
)
DAG = textwrap.dedent(
    """\
    from airflow.sdk import DAG
    from airflow.providers.standard.operators.python import PythonOperator

    REGION = "eu"


    def load(rows, currency):
        return rows


    with DAG("billing", schedule="@daily") as dag:
        PythonOperator(task_id="load", python_callable=load)
    """
)
STG_PATH = "models/staging/stg_subscriptions.sql"
FILES = {
    STG_PATH: STG,
    "models/marts/mrr.sql": MART,
    "macros/money.sql": MONEY,
    "models/staging/schema.yml": SCHEMA,
    "dags/billing.py": DAG,
}


def project(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "billing")
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit_all(repo, "good")
    return repo


def change(repo: Path, edits: dict[str, tuple[str, str]]) -> str:
    """Commit `path -> (old, new)` text replacements; the new commit's id."""
    for rel, (old, new) in edits.items():
        text = (repo / rel).read_text()
        assert text.count(old) == 1, (rel, old)
        (repo / rel).write_text(text.replace(old, new))
    return commit_all(repo, "the change")


def evidence(repo: Path, last_good: str | None = None) -> Evidence:
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="billing", unit_id="model.billing.mrr",
        repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"),
    )  # fmt: skip
    return Evidence(event=event, repo_root=str(repo), last_good_commit=last_good)


def described(intents: list[Intent]) -> list[str]:
    return [i.description for i in intents]


def test_a_staging_column_renamed_is_one_intent(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(repo, {STG_PATH: ("    plan_code,\n", "    plan_code as plan_id,\n")})
    [intent] = change_intents(evidence(repo))
    assert (intent.kind, intent.old, intent.new) == ("column_renamed", "plan_code", "plan_id")
    assert intent.description == "renamed column plan_code to plan_id in stg_subscriptions"
    assert intent.path == "models/staging/stg_subscriptions.sql"


def test_a_binary_file_committed_with_the_change_is_no_intent_and_no_crash(
    tmp_path: Path,
) -> None:
    # a DuckDB file or an ERD image committed beside the rename: not UTF-8, never decoded
    repo = project(tmp_path)
    (repo / "jaffle_shop.duckdb").write_bytes(b"\xa2\xb3DUCK\xc4\xe2" * 64)
    (repo / "etc").mkdir()
    (repo / "etc/erd.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff")
    change(repo, {STG_PATH: ("    plan_code,\n", "    plan_code as plan_id,\n")})
    [intent] = change_intents(evidence(repo))
    assert (intent.kind, intent.old, intent.new) == ("column_renamed", "plan_code", "plan_id")


def test_an_alias_renamed_and_a_macro_expression_renamed(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(repo, {"models/marts/mrr.sql": ("count(*) as subscriptions", "count(*) as subs"),
                  STG_PATH: ("as seats,", "as seat_count,")})  # fmt: skip
    assert sorted(described(change_intents(evidence(repo)))) == [
        "renamed column seats to seat_count in stg_subscriptions",
        "renamed column subscriptions to subs in mrr",
    ]
    repo = project(tmp_path / "2")
    change(repo, {"models/marts/mrr.sql": (" as seats_usd", " as seat_revenue_usd")})
    assert described(change_intents(evidence(repo))) == [
        "renamed column seats_usd to seat_revenue_usd in mrr"
    ]


def test_columns_joins_ctes_types_and_literals(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(
        repo,
        {
            "models/staging/stg_subscriptions.sql": (
                "    account_id,\n    plan_code,\n    cast(seats as int) as seats,\n",
                "    plan_code,\n    cast(seats as bigint) as seats,\n    'web' as channel,\n",
            ),
            "models/marts/mrr.sql": (
                "date '2025-10-31'\n)\n",
                "date '2025-11-30'\n),\nplans as (select * from {{ ref('stg_plans') }})\n",
            ),
        },
    )
    git(repo, "commit", "-q", "--amend", "--no-edit")
    text = (repo / "models/marts/mrr.sql").read_text()
    (repo / "models/marts/mrr.sql").write_text(
        text.replace(
            "from active\n", "from active\nleft join plans on plans.code = active.plan_code\n"
        )
    )
    commit_all(repo, "join the plans")
    base = git(repo, "rev-parse", "HEAD~2")
    assert sorted(described(change_intents(evidence(repo, last_good=base)))) == [
        "added CTE plans to mrr",
        "added column channel to stg_subscriptions",
        "changed '2025-10-31' to '2025-11-30' in where of mrr (CTE active)",
        "changed the type of seats in stg_subscriptions from int to bigint",
        "joined plans as plans in mrr",
        "removed column account_id from stg_subscriptions",
    ]


def test_slips_are_not_intents(tmp_path: Path) -> None:
    repo = project(tmp_path)
    good = git(repo, "rev-parse", "HEAD")
    # a typo of a name that was there, a dropped comma, whitespace
    change(repo, {"models/staging/stg_subscriptions.sql": ("    plan_code,\n", "    plan_cod,\n")})
    assert change_intents(evidence(repo)) == []
    change(repo, {"models/marts/mrr.sql": ("count(*) as subscriptions,",
                                           "count(*) as subscriptions")})  # fmt: skip
    assert change_intents(evidence(repo)) == []
    change(repo, {"models/marts/mrr.sql": ("from active\n", "from   active\n\n")})
    assert change_intents(evidence(repo)) == []
    assert change_intents(evidence(repo, last_good=good)) == []  # all three together
    assert one_slip("plan_code", "plan_cdoe") and one_slip("amount", "amout")
    assert not one_slip("plan_code", "plan_id") and not one_slip("x", "x")


def test_yaml_columns_and_a_broken_yaml(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(repo, {"models/staging/schema.yml": ("- name: plan_code", "- name: plan_id")})
    assert described(change_intents(evidence(repo))) == [
        "renamed column plan_code to plan_id in the properties of stg_subscriptions"
    ]
    change(repo, {"models/staging/schema.yml": ("    columns:\n", "   columns:\n")})
    assert change_intents(evidence(repo)) == []  # an indent lost: a slip, no intent read


def test_python_tasks_parameters_constants_and_airflow2_idioms(tmp_path: Path) -> None:
    repo = project(tmp_path)
    change(
        repo,
        {
            "dags/billing.py": (
                'REGION = "eu"\n\n\ndef load(rows, currency):',
                'REGION = "us"\n\n\ndef load(rows, eur_rates):',
            )
        },
    )
    text = (repo / "dags/billing.py").read_text()
    (repo / "dags/billing.py").write_text(
        text.replace('schedule="@daily"', 'schedule_interval="@daily"')
        + '    PythonOperator(task_id="notify", python_callable=load)\n'
    )
    commit_all(repo, "notify")
    assert sorted(described(change_intents(evidence(repo, git(repo, "rev-parse", "HEAD~2"))))) == [
        "added task notify to dags/billing.py",
        "changed REGION from 'eu' to 'us' in dags/billing.py",
        "introduced the Airflow 2 idiom schedule_interval in dags/billing.py",
        "renamed parameter currency of load to eur_rates in dags/billing.py",
    ]


def test_files_models_and_macros_renamed_moved_deleted(tmp_path: Path) -> None:
    repo = project(tmp_path)
    git(repo, "mv", "models/staging/stg_subscriptions.sql", "models/staging/stg_billing_subs.sql")
    (repo / "pipelines").mkdir()
    git(repo, "mv", "dags/billing.py", "pipelines/billing.py")
    git(repo, "rm", "-q", "models/marts/mrr.sql")
    (repo / "macros/money.sql").write_text(MONEY.replace("cents_to_dollars", "dollars_of"))
    commit_all(repo, "reorganise")
    found = {i.kind: i for i in change_intents(evidence(repo))}
    assert sorted(described(list(found.values()))) == [
        "deleted file models/marts/mrr.sql",
        "moved dags/billing.py to pipelines/billing.py",
        "renamed macro cents_to_dollars to dollars_of",
        "renamed model stg_subscriptions to stg_billing_subs",
    ]
    assert found["model_renamed"].old_path == "models/staging/stg_subscriptions.sql"


def test_the_base_is_the_last_good_commit_when_it_is_an_ancestor(tmp_path: Path) -> None:
    repo = project(tmp_path)
    good = git(repo, "rev-parse", "HEAD")
    change(repo, {STG_PATH: ("    plan_code,\n", "    plan_code as plan_id,\n")})
    change(repo, {"models/marts/mrr.sql": ("count(*) as subscriptions", "count(*) as subs")})
    assert len(change_intents(evidence(repo))) == 1  # the parent: the last commit only
    assert len(change_intents(evidence(repo, last_good=good))) == 2
    assert len(change_intents(evidence(repo, last_good="0" * 40))) == 1  # unknown: the parent


def test_a_model_renamed_in_its_file_and_its_properties(tmp_path: Path) -> None:
    repo = project(tmp_path)
    git(repo, "mv", STG_PATH, "models/staging/stg_billing_subs.sql")
    change(repo, {"models/staging/schema.yml": ("- name: stg_subscriptions",
                                                "- name: stg_billing_subs")})  # fmt: skip
    assert sorted(described(change_intents(evidence(repo)))) == [
        "renamed model stg_subscriptions to stg_billing_subs",
        "renamed model stg_subscriptions to stg_billing_subs in the properties file "
        "models/staging/schema.yml",
    ]


def test_read_intents_needs_no_git() -> None:
    after = STG.replace("    plan_code,\n", "    plan_code as plan_id,\n")
    found = read_intents([("stg.sql", STG, after), ("new.sql", None, "select 1")], [])
    assert described(found) == ["renamed column plan_code to plan_id in stg"]


def test_a_column_glued_to_jinja_is_described_as_written() -> None:
    before = (
        "select order_id,\n{% for m in methods %}\n    sum(case when method = '{{ m }}' then "
        "amount end) as {{ m }}_amount,\n{% endfor %}\n    sum(amount) as total\n"
        "from {{ ref('payments') }}\ngroup by 1\n"
    )
    after = before.replace("as {{ m }}_amount", "as {{ m }}_paid")
    (found,) = read_intents([("models/orders.sql", before, after)], [])
    assert found.kind == "column_renamed"
    assert found.description == "renamed column {{ m }}_amount to {{ m }}_paid in orders"
    assert "__jinja_" in found.old  # the name the revert check compares stays the parsed one


def test_a_docs_block_and_a_var_renamed_are_intents_and_their_revert_is_caught() -> None:
    from patchit.evidence.intents import reverted_intents

    docs = "{% docs orders_status %}\nOne of placed, shipped, completed.\n{% enddocs %}\n"
    project = 'name: shop\nvars:\n  payment_methods: ["card", "coupon"]\n'
    new_docs = docs.replace("docs orders_status", "docs status_values")
    new_project = project.replace("payment_methods", "shop_payment_methods")
    found = read_intents(
        [("models/docs.md", docs, new_docs), ("dbt_project.yml", project, new_project)], []
    )
    assert [i.description for i in found] == [
        "renamed docs block orders_status to status_values",
        "renamed project var payment_methods to shop_payment_methods",
    ]
    undone = reverted_intents(
        found, {"models/docs.md": (new_docs, docs), "dbt_project.yml": (new_project, project)}
    )
    assert [i.kind for i in undone] == ["docs_renamed", "var_renamed"]
    followed = {"models/schema.yml": ("doc('orders_status')", "doc('status_values')")}
    assert reverted_intents(found, followed) == []
