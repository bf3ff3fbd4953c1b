"""Generate a synthetic, realistic DuckDB dbt project of any size, and break one model in it.

Layers as in a real warehouse: a few seeds, staging views (one source each, columns renamed),
intermediate tables (joins and per-customer aggregates of earlier models) and marts (one row
per customer or per day). Every model up to the marts exposes the same five columns, so any
model can ref any earlier one; the DAG is random but fixed by `seed`. Some models carry
`unique`/`not_null` tests. Used by `patchit bench` and meant for the benchmark corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

SEEDS = ("raw_customers", "raw_orders", "raw_payments", "raw_refunds")
SEED_ROWS = 300
STATUSES = ("placed", "shipped", "completed", "returned")
TYPO_FROM, TYPO_TO = "a.amount", "a.amout"

_STAGING_SQL = """\
select
    id as record_id,
    customer_id,
    cast(amount_cents as double) / 100 as amount,
    lower(status) as status,
    cast(created_at as date) as event_date
from {{{{ ref('{seed}') }}}}
where id is not null
"""

_INTERMEDIATE_SQL = """\
with base as (
    select * from {{{{ ref('{left}') }}}}
),

per_customer as (
    select customer_id, sum(amount) as amount, count(*) as n_records
    from {{{{ ref('{right}') }}}}
    group by customer_id
)

select
    a.record_id,
    a.customer_id,
    round({typo_site} * {factor} + coalesce(b.amount, 0) / greatest(b.n_records, 1), 2) as amount,
    a.status,
    a.event_date
from base as a
left join per_customer as b on a.customer_id = b.customer_id
"""

_MART_SQL = """\
select
    {key},
    count(*) as n_records,
    round(sum(amount), 2) as total_amount,
    count(distinct status) as n_statuses,
    max(event_date) as last_event_date
from {{{{ ref('{upstream}') }}}}
group by {key}
"""


@dataclass
class GeneratedProject:
    """What was written: the project dir, its models by layer and its data tests."""

    root: Path
    name: str
    db_file: str
    layers: dict[str, list[str]] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)
    n_tests: int = 0

    @property
    def models(self) -> list[str]:
        return [m for layer in ("staging", "intermediate", "marts") for m in self.layers[layer]]

    def model_path(self, model: str) -> Path:
        """The model's file relative to the project root."""
        layer = next(name for name, models in self.layers.items() if model in models)
        return Path("models") / layer / f"{model}.sql"

    def descendants(self, model: str) -> set[str]:
        """Models downstream of `model` (not `model` itself)."""
        children: dict[str, set[str]] = {}
        for child, parents in self.parents.items():
            for parent in parents:
                children.setdefault(parent, set()).add(child)
        found: set[str] = set()
        todo = [model]
        while todo:
            for child in children.get(todo.pop(), set()) - found:
                found.add(child)
                todo.append(child)
        return found

    def middle_model(self) -> str:
        """The intermediate model nearest the middle of its layer that has models downstream:
        the one a bench breaks."""
        layer = self.layers["intermediate"]
        by_distance = sorted(range(len(layer)), key=lambda i: abs(i - len(layer) // 2))
        with_children = [layer[i] for i in by_distance if self.descendants(layer[i])]
        return (with_children or [layer[len(layer) // 2]])[0]


def layer_sizes(n_models: int) -> tuple[int, int, int]:
    """(staging, intermediate, marts) adding up to n_models: about 20/55/25 percent."""
    if n_models < 6:
        raise ValueError(f"a generated project needs at least 6 models, not {n_models}")
    staging = max(len(SEEDS), n_models // 5)
    marts = max(1, n_models // 4)
    return staging, n_models - staging - marts, marts


def _write_seed(path: Path, rng: random.Random) -> None:
    start = date(2024, 1, 1)
    lines = ["id,customer_id,amount_cents,status,created_at"]
    for row_id in range(1, SEED_ROWS + 1):
        day = start + timedelta(days=rng.randrange(365))
        status = rng.choice(STATUSES).upper()
        lines.append(f"{row_id},{rng.randrange(1, 60)},{rng.randrange(100, 50000)},{status},{day}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _schema_yml(tests: dict[str, list[tuple[str, list[str]]]]) -> str:
    lines = ["version: 2", "", "models:"]
    for model, columns in tests.items():
        lines.append(f"  - name: {model}")
        lines.append("    columns:")
        for column, column_tests in columns:
            lines.append(f"      - name: {column}")
            lines.append(f"        data_tests: [{', '.join(column_tests)}]")
    return "\n".join(lines) + "\n"


def generate_project(
    dest: Path, n_models: int, name: str = "bench", seed: int = 7
) -> GeneratedProject:
    """Write a dbt project with `n_models` models (plus seeds) at `dest`, profiles.yml inside
    (DuckDB, `path: <name>.duckdb` relative, so run dbt from `dest`)."""
    rng = random.Random(seed)
    n_staging, n_intermediate, n_marts = layer_sizes(n_models)
    project = GeneratedProject(root=dest, name=name, db_file=f"{name}.duckdb")
    for sub in ("seeds", "models/staging", "models/intermediate", "models/marts"):
        (dest / sub).mkdir(parents=True, exist_ok=True)
    (dest / "dbt_project.yml").write_text(
        f"name: {name}\nversion: '1.0.0'\nconfig-version: 2\nprofile: {name}\n"
        "model-paths: [models]\nseed-paths: [seeds]\n"
        f"models:\n  {name}:\n    staging:\n      +materialized: view\n"
        "    intermediate:\n      +materialized: table\n    marts:\n      +materialized: table\n",
        encoding="utf-8",
    )
    (dest / "profiles.yml").write_text(
        f"{name}:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
        f"      path: {project.db_file}\n      threads: 4\n",
        encoding="utf-8",
    )
    for seed_name in SEEDS:
        _write_seed(dest / "seeds" / f"{seed_name}.csv", rng)

    layers: dict[str, list[str]] = {"staging": [], "intermediate": [], "marts": []}
    tests: dict[str, dict[str, list[tuple[str, list[str]]]]] = {k: {} for k in layers}
    for i in range(n_staging):
        model, seed_name = f"stg_{i:03d}", SEEDS[i % len(SEEDS)]
        (dest / "models/staging" / f"{model}.sql").write_text(_STAGING_SQL.format(seed=seed_name))
        layers["staging"].append(model)
        project.parents[model] = []
        tests["staging"][model] = [("record_id", ["unique", "not_null"])]
    for i in range(n_intermediate):
        model = f"int_{i:03d}"
        # Mostly recent upstreams, so chains run deep as in real projects.
        pool = layers["staging"] + layers["intermediate"]
        left = pool[-1 - min(int(rng.expovariate(0.3)), len(pool) - 1)]
        right = rng.choice(layers["staging"])
        sql = _INTERMEDIATE_SQL.format(
            left=left, right=right, typo_site=TYPO_FROM, factor=rng.choice((0.9, 1.0, 1.1))
        )
        (dest / "models/intermediate" / f"{model}.sql").write_text(sql)
        layers["intermediate"].append(model)
        project.parents[model] = sorted({left, right})
        if i % 3 == 0:
            tests["intermediate"][model] = [("record_id", ["unique", "not_null"])]
    for i in range(n_marts):
        model = f"mart_{i:03d}"
        upstream = rng.choice(layers["intermediate"])
        key = "customer_id" if i % 2 == 0 else "event_date"
        (dest / "models/marts" / f"{model}.sql").write_text(
            _MART_SQL.format(key=key, upstream=upstream)
        )
        layers["marts"].append(model)
        project.parents[model] = [upstream]
        tests["marts"][model] = [(key, ["unique", "not_null"])]
    for layer, layer_tests in tests.items():
        (dest / "models" / layer / "schema.yml").write_text(_schema_yml(layer_tests))
        project.n_tests += sum(len(t) for cols in layer_tests.values() for _, t in cols)
    project.layers = layers
    return project


def break_model(project: GeneratedProject, model: str) -> tuple[str, str]:
    """Put a column typo (`a.amount` -> `a.amout`) into an intermediate model; returns the
    file's (good, broken) text so a caller can write the fix back."""
    path = project.root / project.model_path(model)
    good = path.read_text(encoding="utf-8")
    if TYPO_FROM not in good:
        raise ValueError(f"{model} has no `{TYPO_FROM}` to break; pick an intermediate model")
    broken = good.replace(TYPO_FROM, TYPO_TO, 1)
    path.write_text(broken, encoding="utf-8")
    return good, broken
