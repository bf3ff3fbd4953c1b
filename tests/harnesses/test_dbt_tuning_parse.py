"""The warm worker's changes to dbt's parse and selection (`tuning_parse`) answer as dbt does:
real dbt, in a fresh interpreter each (a tuning is installed for the rest of a process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # imports dbt

_PROJECT = {
    "dbt_project.yml": "name: shop\nprofile: shop\nconfig-version: 2\n"
    "quoting: {identifier: true}\n"
    "models:\n  shop:\n    +materialized: view\n    marts:\n      +schema: marts\n",
    "profiles.yml": "shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
    "      path: shop.duckdb\n",
    "models/staging/stg_orders.sql": "select 1 as id",
    "models/staging/staging.sql": "select 2 as id",  # named as its folder
    "models/marts/orders.sql": "{{ config(alias='fct_orders') }} "
    "select * from {{ ref('stg_orders') }}",
    "models/marts/dim_customers_v2.sql": "select 1 as id",
    "models/marts/dim_customers_v3.sql": "select 1 as id",
    "models/marts/quoted.sql": "{{ config(quoting={'identifier': false}) }} select 1 as id",
    "models/marts/schema.yml": "version: 2\nmodels:\n"
    "  - name: orders\n    columns:\n      - name: id\n        data_tests: [not_null, unique]\n"
    "  - name: dim_customers\n    latest_version: 3\n    versions:\n      - v: 2\n      - v: 3\n",
}


def _project(root: Path) -> list[str]:
    for name, text in _PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    return ["--project-dir", str(root), "--profiles-dir", str(root)]


def _run(program: str, root: Path, *args: str) -> object:
    """`program` in a fresh interpreter; the JSON its last line prints."""
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    done = subprocess.run(
        [sys.executable, "-c", program, *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_SELECT = """
import json, sys
from dbt.cli.main import dbtRunner
from dbt.graph.selector_methods import QualifiedNameSelectorMethod
from patchit.harnesses.dbt import tuning_parse
manifest = dbtRunner().invoke(["parse", *sys.argv[1:]]).result
everything = {*manifest.nodes, *manifest.sources, *manifest.unit_tests}
some = {u for u in everything if "orders" not in u}  # a run's included nodes: not all
selectors = ["stg_orders", "orders", "staging", "marts", "shop", "dim_customers",
             "dim_customers_v2", "dim_customers_v3", "v2", "quoted", "nothing_here",
             "stg_*", "marts.orders", "shop.staging.stg_orders", "fct_orders"]
def answers():
    method = QualifiedNameSelectorMethod(manifest, None, [])
    return {f"{s} {part}": sorted(method.search(c, s)) for s in selectors
            for part, c in (("all", everything), ("some", some))}
before = answers()
tuning_parse._name_selection_indexed()
assert QualifiedNameSelectorMethod.search._patchit
print(json.dumps([before, answers(), answers()]))
"""


def test_a_name_selects_the_nodes_dbt_selects(tmp_path: Path) -> None:
    """Plain names (a model, a folder, the package, a versioned model by name and version),
    dotted and wildcard selectors, over all nodes and over a run's part of them: the same
    nodes, from the index made once and when it is read again."""
    dbt_s, ours, again = _run(_SELECT, tmp_path, *_project(tmp_path))  # type: ignore[misc]
    assert ours == dbt_s == again
    assert len(dbt_s["staging all"]) == 2  # the folder: both staging models
    assert dbt_s["shop all"] and dbt_s["dim_customers all"] and dbt_s["stg_* all"]
    assert dbt_s["orders all"] != dbt_s["orders some"]


_NAMES = """
import json, sys
from dbt.adapters.factory import get_relation_class_by_name
from dbt.cli.main import dbtRunner
from dbt.config.runtime import RuntimeConfig
import dbt.parser.manifest as loader
from patchit.harnesses.dbt import tuning_parse
manifest = dbtRunner().invoke(["parse", *sys.argv[1:]]).result
from dbt.flags import get_flags
config = RuntimeConfig.from_args(get_flags())
nodes = [n for n in manifest.nodes.values() if n.is_relational]
def names(cls):
    return [str(cls.create_from(quoting=config, relation_config=n)) for n in nodes]
dbt_s = names(get_relation_class_by_name("duckdb"))
tuning_parse._relation_names_merged_once()
stand_in = loader.get_relation_class_by_name("duckdb")
assert stand_in is loader.get_relation_class_by_name("duckdb")
assert type(stand_in).__name__ == "_MergedOnce"
ours = names(stand_in)
stand_in.remember(config, manifest.nodes.values())  # as the worker does on decoding a parse
kinds = {type(stand_in.create_from(quoting=config, relation_config=n)).__name__ for n in nodes}
remembered = names(stand_in)
loader._check_resource_uniqueness(manifest, config)
twin = next(n for n in nodes if n.name == "stg_orders")
twin_of = next(n for n in nodes if n.name == "staging")
twin_of.alias = twin.alias  # two nodes, one relation
try:
    loader._check_resource_uniqueness(manifest, config)
    clash = None
except Exception as exc:
    clash = type(exc).__name__
print(json.dumps([dbt_s, ours, clash, sorted(kinds), remembered]))
"""


def test_relation_names_are_dbt_s_and_a_clash_is_still_found(tmp_path: Path) -> None:
    """Project quoting, a node's own quoting, an alias, a custom schema: each node's relation
    name as dbt's relation class makes it, made again or remembered; two nodes on one relation
    still fail the check, with the names remembered."""
    dbt_s, ours, clash, kinds, remembered = _run(_NAMES, tmp_path, *_project(tmp_path))  # type: ignore[misc]
    assert ours == dbt_s == remembered
    assert kinds == ["_Named"]  # the names made once; a node whose alias moved is named anew
    assert '"shop"."main_marts"."fct_orders"' in dbt_s and len(dbt_s) == 6
    assert clash == "AmbiguousAliasError"


_YAML = """
import json, os, sys, time
from dbt.cli.main import dbtRunner
import dbt.parser.read_files as read_files
from patchit.harnesses.dbt import tuning_parse
args = ["parse", *sys.argv[2:]]
dbtRunner().invoke(args)  # saves the parse
tuning_parse._schema_files_by_contents()
parsed = []
real = read_files.yaml_from_file
def counting(source_file, **kw):
    parsed.append(source_file.path.relative_path)
    return real(source_file, **kw)
read_files.yaml_from_file = counting
schema = sys.argv[1]
def parse():
    later = time.time() + 5
    for path in (schema,):
        os.utime(path, (later, later))  # a fresh checkout: every time moved
    del parsed[:]
    manifest = dbtRunner().invoke(args).result
    tests = sorted(u for u in manifest.nodes if u.startswith("test."))
    return [list(parsed), tests]
same = parse()
with open(schema, "a") as f:
    f.write("  - name: stg_orders\\n    columns:\\n      - name: id\\n"
            "        data_tests: [unique]\\n")
changed = parse()
print(json.dumps([same, changed]))
"""


def test_a_properties_file_as_saved_is_not_parsed_again(tmp_path: Path) -> None:
    """Its time moved, its contents did not: the saved parse's YAML is taken, the tests are
    the same; once its contents change it is parsed, and the new test is there."""
    args = _project(tmp_path)
    schema = str(tmp_path / "models" / "marts" / "schema.yml")
    same, changed = _run(_YAML, tmp_path, schema, *args)  # type: ignore[misc]
    assert same[0] == [] and len(same[1]) == 2
    assert changed[0] == ["marts/schema.yml"]
    assert len(changed[1]) == 3 and set(same[1]) < set(changed[1])
