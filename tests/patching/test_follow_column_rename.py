"""Following a column rename of the breaking change to every consumer, in one candidate: real
git, the fix-it's own reading of the change (sqlglot, ruamel); no dbt."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.column_renames import column_renames
from patchit.patching.fixits.follow_rename import FollowColumnRenameStrategy, missing_column
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo
from tests.patching.contract import StrategyContract

STAGING = "models/staging/stg_orders.sql"
PROJECT = {
    "dbt_project.yml": "name: shop\nprofile: shop\nconfig-version: 2\n",
    "seeds/raw_orders.csv": "id,customer_id,status\n1,1,placed\n",
    "seeds/raw_customers.csv": "id,name\n1,Ann\n",
    STAGING: (
        "select\n    id as order_id,\n    customer_id,\n    status\nfrom {{ ref('raw_orders') }}\n"
    ),
    "models/staging/stg_customers.sql": (
        "select id as customer_id, name from {{ ref('raw_customers') }}\n"
    ),
    "models/marts/orders.sql": (
        "select\n    o.order_id,\n    o.status,\n    c.name\n"
        "from {{ ref('stg_orders') }} as o\n"
        "join {{ ref('stg_customers') }} as c on c.customer_id = o.customer_id\n"
        "where o.status <> 'returned'\n"
    ),
    "models/marts/status_counts.sql": (
        "with orders as (\n    select * from {{ ref('stg_orders') }}\n)\n\n"
        "select\n    status,\n    count(*) as orders\nfrom orders\ngroup by status\n"
    ),
    "models/marts/open_orders.sql": (
        "select order_id from {{ ref('stg_orders') }} where status = 'placed'\n"
    ),
    "models/staging/schema.yml": (
        "version: 2\n\nmodels:\n  - name: stg_orders\n    columns:\n      - name: order_id\n"
        "        data_tests: [unique]\n      - name: status  # the lifecycle\n"
        "        data_tests:\n          - accepted_values:\n              arguments:\n"
        "                values: ['placed', 'returned']\n"
    ),
    "models/marts/schema.yml": (
        "version: 2\n\nmodels:\n  - name: status_counts\n    columns:\n      - name: status\n"
        "        data_tests:\n          - relationships:\n              arguments:\n"
        "                to: ref('stg_orders')\n                field: status\n"
    ),
}
RENAME = ("    status\n", "    status as order_status\n")


def make_repo(tmp_path: Path, extra: dict[str, str] | None = None) -> Path:
    repo = init_repo(tmp_path / "shop")
    for rel, text in {**PROJECT, **(extra or {})}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit_all(repo, "good")
    path = repo / STAGING
    path.write_text(path.read_text().replace(*RENAME))
    commit_all(repo, "stg_orders: order_status")
    return repo


def evidence(repo: Path, unit: str = "orders", message: str = "") -> Evidence:
    message = message or (
        'Binder Error: Table "o" does not have a column named "status"\n'
        'Candidate bindings: : "order_status"'
    )
    path = f"models/marts/{unit}.sql"
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id=f"model.shop.{unit}",
        unit_path=path, status="error", error_type="Runtime Error", error_message=message,
        repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"),
        dbt=DbtInvocation(command="build", project_dir=str(repo), cwd=str(repo)),
    )  # fmt: skip
    return Evidence(event=event, repo_root=str(repo), project_dir="", unit_path=path,
                    error=message)  # fmt: skip


def fix(ev: Evidence) -> list:  # type: ignore[type-arg]
    return FollowColumnRenameStrategy().fix(ev, [])


def test_one_candidate_follows_the_rename_to_every_consumer(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (candidate,) = fix(evidence(repo))
    assert sorted({e.path for e in candidate.edits}) == [
        "models/marts/open_orders.sql", "models/marts/orders.sql",
        "models/marts/schema.yml", "models/marts/status_counts.sql", "models/staging/schema.yml",
    ]  # fmt: skip
    assert candidate.follows == {"status": "order_status"}
    assert "renamed stg_orders's column status -> order_status" in candidate.rationale
    apply_edits(repo, candidate.edits)
    read = lambda rel: (repo / rel).read_text()  # noqa: E731
    # a whole select item keeps its output name; every other reference reads the new one
    assert "    o.order_status as status,\n" in read("models/marts/orders.sql")
    assert "where o.order_status <> 'returned'" in read("models/marts/orders.sql")
    counts = read("models/marts/status_counts.sql")
    assert "    order_status as status,\n" in counts and "group by order_status\n" in counts
    assert "where order_status = 'placed'" in read("models/marts/open_orders.sql")
    assert "      - name: order_status  # the lifecycle\n" in read("models/staging/schema.yml")
    marts = read("models/marts/schema.yml")
    assert "field: order_status\n" in marts and "      - name: status\n" in marts
    assert "status as order_status" in read(STAGING)  # the rename itself is kept


def test_a_test_of_the_renamed_model_is_healed_by_the_same_candidate(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    ev = evidence(repo, message='Binder Error: Referenced column "status" not found in FROM '
                  'clause!\nCandidate bindings: "order_status"')  # fmt: skip
    ev = ev.model_copy(update={"unit_path": "models/staging/schema.yml",
                               "tested_model": "stg_orders"})  # fmt: skip
    (candidate,) = fix(ev)
    assert "models/staging/schema.yml" in {e.path for e in candidate.edits}


@pytest.mark.parametrize(
    ("rel", "text"),
    [
        # the old name inside Jinja that is not SQL: its meaning is not in the SQL
        (
            "models/marts/jinja.sql",
            "select {{ var('status') }} as s from {{ ref('stg_orders') }}\n",
        ),
        (
            "models/marts/jinja_set.sql",
            "{% set c = 'status' %}select {{ c }} as s from {{ ref('stg_orders') }}\n",
        ),
        # in ORDER BY a bare status is the select's own alias, not the model's column
        (
            "models/marts/ordered.sql",
            "select count(*) as status from {{ ref('stg_orders') }} order by status\n",
        ),
        # quoted: a name it cannot compare with confidence
        ("models/marts/quoted.sql", "select \"status\" from {{ ref('stg_orders') }}\n"),
        # an output * passes the new name on, and a consumer of that model cannot be read
        (
            "models/marts/star.sql",
            "select * from {{ ref('stg_orders') }}\n-- {{ ref('quoted_reader') }}\n",
        ),
        # two relations may answer a bare status
        ("models/marts/legacy.sql", "select 1 as id, 'x' as status\n"),
        # a join USING the old name
        (
            "models/marts/using.sql",
            "select o.order_id from {{ ref('stg_orders') }} as o join {{ ref('stg_orders') }} "
            "as p using (status)\n",
        ),
        # a Python model that names it
        (
            "models/marts/py_model.py",
            "def model(dbt, session):\n    return dbt.ref('stg_orders').select('status')\n",
        ),
    ],
)
def test_anything_it_cannot_read_with_confidence_refuses_the_whole_candidate(
    tmp_path: Path, rel: str, text: str
) -> None:
    extra = {rel: text}
    if rel.endswith("star.sql"):
        extra["models/marts/quoted_reader.sql"] = "select \"status\" from {{ ref('star') }}\n"
    if rel.endswith("legacy.sql"):
        extra["models/marts/two.sql"] = (
            "select status from {{ ref('stg_orders') }} as o join {{ ref('legacy') }} as l "
            "on l.id = o.order_id\n"
        )
    assert fix(evidence(make_repo(tmp_path, extra))) == []


PASS_THROUGH = {
    # jaffle-shop's `orders`: `orders.*` from the staging model, then its own columns
    "models/marts/enriched.sql": (
        "with orders as (\n    select * from {{ ref('stg_orders') }}\n),\n\n"
        "flagged as (\n    select\n        orders.*,\n"
        "        orders.status = 'placed' as is_open\n    from orders\n)\n\n"
        "select * from flagged\n"
    ),
    # reads the old name from the pass-through model, as `customers` reads `orders`
    "models/marts/open_by_status.sql": (
        "select\n    e.status,\n    count(*) as open_orders\n"
        "from {{ ref('enriched') }} as e\nwhere e.is_open\ngroup by e.status\n"
    ),
    "models/marts/enriched.yml": (
        "version: 2\n\nmodels:\n  - name: enriched\n    columns:\n      - name: status\n"
        "        data_tests: [not_null]\n"
    ),
}


def test_a_rename_is_followed_through_a_model_that_selects_star(tmp_path: Path) -> None:
    """jaffle-shop's rename through `orders.*`: only the YAML test on the pass-through model
    fails at first; one candidate follows the rename into it, its consumer and its YAML."""
    repo = make_repo(tmp_path, PASS_THROUGH)
    ev = evidence(repo, message='Binder Error: Referenced column "status" not found in FROM '
                  'clause!\nCandidate bindings: "order_status"')  # fmt: skip
    ev = ev.model_copy(update={"unit_path": "models/marts/enriched.yml",
                               "tested_model": "enriched"})  # fmt: skip
    (candidate,) = fix(ev)
    assert "through enriched's `*`" in candidate.rationale
    apply_edits(repo, candidate.edits)
    read = lambda rel: (repo / rel).read_text()  # noqa: E731
    assert "        orders.order_status = 'placed' as is_open\n" in read(
        "models/marts/enriched.sql"
    )
    assert "        orders.*,\n" in read("models/marts/enriched.sql")  # still passes it on
    consumer = read("models/marts/open_by_status.sql")
    assert "    e.order_status as status,\n" in consumer
    assert consumer.endswith("group by e.order_status\n")
    assert "      - name: order_status\n" in read("models/marts/enriched.yml")
    # the first consumers are followed as before
    assert "    o.order_status as status,\n" in read("models/marts/orders.sql")
    assert "      - name: order_status  # the lifecycle\n" in read("models/staging/schema.yml")


def test_two_columns_renamed_by_the_change_are_followed_together(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    good = git(repo, "rev-parse", "HEAD~1").strip()
    path = repo / STAGING
    path.write_text(
        path.read_text().replace("    customer_id,\n", "    customer_id as buyer_id,\n")
    )
    commit_all(repo, "stg_orders: buyer_id too")
    ev = evidence(repo).model_copy(update={"last_good_commit": good})
    (candidate,) = fix(ev)
    assert candidate.follows == {"customer_id": "buyer_id", "status": "order_status"}
    apply_edits(repo, candidate.edits)
    orders = (repo / "models/marts/orders.sql").read_text()
    assert "on c.customer_id = o.buyer_id" in orders


def test_no_rename_in_the_change_no_candidate(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    ev = evidence(repo, message='Binder Error: Referenced column "amount" not found in FROM '
                  'clause!')  # fmt: skip
    assert fix(ev) == []
    ev = evidence(repo, message='Parser Error: syntax error at or near "status"')
    assert fix(ev) == []


def test_a_unit_that_does_not_read_the_renamed_model_gets_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    ev = evidence(repo, unit="unrelated")
    assert fix(ev) == []


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("select x, a from t", "select x as y, a from t", {"x": "y"}),
        ("select a as x, b from t", "select a as y, b from t", {"x": "y"}),
        (
            "select upper(c) as country from t",
            "select upper(c) as country_code from t",
            {"country": "country_code"},
        ),
        ("select x, a from t", "select x, a, x as y from t", {}),  # added, not renamed
        ("select x, y from t", "select x as z, y from t", {"x": "z"}),
        # a `*` beside named outputs (the jaffle shop's `customers.*, ... as customer_type`):
        # the named outputs' rename is read when the change left the star as it was
        ("select *, x from t", "select *, x as y from t", {"x": "y"}),
        (
            "with j as (select c.*, case when n > 1 then 'r' else 'n' end as customer_type"
            " from c) select * from j",
            "with j as (select c.*, case when n > 1 then 'r' else 'n' end as customer_segment"
            " from c) select * from j",
            {"customer_type": "customer_segment"},
        ),
        ("select *, x from t", "select t.*, x as y from t", None),  # the star changed
        ("select x from t", 'select x as "Y" from t', None),  # quoted
        ("select {{ m('x') }} as x from t", "select {{ m('x') }} as y from t", None),  # Jinja
        ("select x as a, x as b from t", "select x as c from t", {}),  # two gone, one expr
        ("select x from", "select x as y from t", None),  # does not parse
        # dbt's style: the outputs are the CTE's that the closing `select *` passes on
        (
            "with r as (select id, d from t) select * from r",
            "with r as (select id, d as day from t) select * from r",
            {"d": "day"},
        ),
        (
            "with r as (select d from t), f as (select * from r) select * from f",
            "with r as (select d as day from t), f as (select * from r) select * from f",
            {"d": "day"},
        ),
        (  # a `*` over a join, or over a relation outside the file, is not followed
            "with r as (select d from t) select * from r join u using (id)",
            "with r as (select d as day from t) select * from r join u using (id)",
            None,
        ),
        ("with r as (select * from t) select * from r", "select d as day from t", None),
    ],
)
def test_renames_read_from_a_model_before_and_after(
    before: str, after: str, expected: dict[str, str] | None
) -> None:
    assert column_renames(before, after) == expected


def test_the_missing_column_of_each_engine() -> None:
    assert missing_column('Referenced column "Status" not found in FROM clause!') == "status"
    assert missing_column('Values list "o" does not have a column named "x"') == "x"
    assert missing_column('column "status" does not exist') == "status"
    assert missing_column("column o.status does not exist\nLINE 3") == "status"
    assert missing_column('Binder Error: Column "monthly_amount" referenced that exists in the '
                          "SELECT clause - but this column cannot be referenced before it is "
                          "defined") == "monthly_amount"  # fmt: skip
    assert missing_column('syntax error at or near "x"') is None


class TestFollowColumnRenameContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return FollowColumnRenameStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        return evidence(make_repo(tmp_path))

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        message = 'Binder Error: Referenced column "amount" not found in FROM clause!'
        return evidence(make_repo(tmp_path), message=message)


def test_the_rename_is_followed_before_one_file_is_fixed_or_the_change_reverted() -> None:
    from patchit.patching.registry import load_strategies

    order = [s.name for s in load_strategies()]
    follow = order.index("dbt_follow_column_rename")
    assert follow < order.index("duckdb_rename_column") < order.index("partial_revert")


JAFFLE_STAGING = (  # the dbt-labs/jaffle_shop shape: a CTE per step, `select *` at the end
    "with source as (\n    select * from {{ ref('raw_orders') }}\n),\n\nrenamed as (\n"
    "    select\n        id as order_id,\n        customer_id,\n        status\n"
    "    from source\n)\n\nselect * from renamed\n"
)
JAFFLE_ORDERS = (  # a Jinja loop whose expressions are glued to names: `{{ m }}_amount`
    "{% set methods = ['card', 'coupon'] %}\n\nwith orders as (\n"
    "    select * from {{ ref('stg_orders') }}\n),\n\npayments as (\n    select\n"
    "        order_id,\n        {% for m in methods -%}\n"
    "        sum(case when method = '{{ m }}' then amount else 0 end) as {{ m }}_amount,\n"
    "        {% endfor -%}\n        sum(amount) as total\n    from orders\n"
    "    group by order_id\n),\n\nfinal as (\n    select\n        orders.order_id,\n"
    "        orders.status,\n        {% for m in methods -%}\n"
    "        payments.{{ m }}_amount,\n        {% endfor -%}\n        payments.total\n"
    "    from orders\n    left join payments on orders.order_id = payments.order_id\n)\n\n"
    "select * from final\n"
)


def test_a_staging_model_in_dbts_style_and_a_jinja_loop_consumer(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path, {STAGING: JAFFLE_STAGING, "models/marts/orders.sql": JAFFLE_ORDERS}
    )  # make_repo renames `status` in the staging model's CTE
    ev = evidence(repo, message='Binder Error: Values list "orders" does not have a column '
                  'named "status"')  # fmt: skip
    (candidate,) = fix(ev)
    apply_edits(repo, candidate.edits)
    orders = (repo / "models/marts/orders.sql").read_text()
    assert "        orders.order_status as status,\n" in orders  # keeps the mart's output
    assert "{{ m }}_amount" in orders and "status as order_status" in (repo / STAGING).read_text()


def test_sql_in_a_macros_string_argument_and_an_aggregate_under_its_old_name(
    tmp_path: Path,
) -> None:
    extra = {
        "models/marts/money.sql": (
            "with o as (\n    select count(status) as status from {{ ref('stg_orders') }}\n)\n"
            "select {{ upper_of('o.status') }} as n, "
            '{{ billing.upper_of("max(s.status)", 2) }} as m\n'
            "from o cross join {{ ref('stg_orders') }} as s\n"
        ),
    }
    repo = make_repo(tmp_path, extra)
    (candidate,) = fix(evidence(repo))
    apply_edits(repo, candidate.edits)
    money = (repo / "models/marts/money.sql").read_text()
    # the CTE's aggregate reads the new name under the old output; o.status is the CTE's own
    assert "select count(order_status) as status from" in money
    assert "{{ upper_of('o.status') }} as n" in money
    assert '{{ billing.upper_of("max(s.order_status)", 2) }} as m' in money


def test_a_package_upgrade_renaming_a_staging_column_is_followed_in_the_project_only(
    tmp_path: Path,
) -> None:
    """`dbt deps` installed stripe_source under dbt_packages/; its upgrade renamed a column of
    a staging model the project reads: the project's model follows, the package is not edited."""
    package = "dbt_packages/stripe_source"
    repo = init_repo(tmp_path / "ledger")
    files = {
        "dbt_project.yml": "name: ledger\nprofile: ledger\nconfig-version: 2\n",
        f"{package}/dbt_project.yml": "name: stripe_source\nversion: '0.9.3'\n",
        f"{package}/models/stg_stripe__charge.sql": (
            "with base as (select * from {{ source('stripe', 'charge') }}),\n"
            "fields as (\n    select\n        id as charge_id,\n        amount_refunded,\n"
            "        {{ stripe_source.to_ts('created') }} as created_at\n    from base\n)\n"
            "select * from fields\n"
        ),
        "models/charges.sql": (
            "select c.charge_id, c.amount_refunded from {{ ref('stg_stripe__charge') }} as c\n"
        ),
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit_all(repo, "good")
    staging = repo / package / "models/stg_stripe__charge.sql"
    staging.write_text(staging.read_text().replace("amount_refunded,", "amount_refunded as "
                                                   "refunded_amount,"))  # fmt: skip
    commit_all(repo, "deps: stripe_source 0.10.0")
    message = 'Binder Error: Values list "c" does not have a column named "amount_refunded"'
    ev = evidence(repo, message=message).model_copy(update={"unit_path": "models/charges.sql"})
    ev.event.unit_path, ev.event.unit_id = "models/charges.sql", "model.ledger.charges"
    (candidate,) = fix(ev)
    assert {e.path for e in candidate.edits} == {"models/charges.sql"}
    assert candidate.follows == {"amount_refunded": "refunded_amount"}
    apply_edits(repo, candidate.edits)
    assert "c.refunded_amount as amount_refunded" in (repo / "models/charges.sql").read_text()
