"""patchit.harnesses.dbt: the dbt harness and everything a dbt candidate's run needs.

`harness` is the face (`DbtHarness`, the `patchit.harnesses` entry point `dbt`); `units`
selects and judges, `preparation` makes a run's worktree, environment, warehouse copy and
profile, `changes` tells which nodes a candidate changed; `pg`/`pg_schemas` and `sf` are the
Postgres and Snowflake sandbox schemas. The warm worker (`python -m
patchit.harnesses.dbt.worker`, which imports only its own side; `worker_handle` is the
harness's) serves runs (`serve`), each a fork that starts from a saved parse (`parses`,
`saved_parse`, `flat_graph`, `subset`), with dbt tuned once (`tuning`) and timed (`phases`),
its DuckDB warehouse cut beside its start (`warehouse_gate`); `prewarm` starts it before the
heal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchit.harnesses.dbt.harness import DbtHarness

__all__ = ["DbtHarness"]


def __getattr__(name: str) -> Any:
    # `patchit.harnesses.dbt:DbtHarness` was the harness's path before this package, and an entry
    # point or a plugin may still name it; imported on first use, so that a module of this
    # package (the warm worker's process) does not load the harness with it
    if name == "DbtHarness":
        from patchit.harnesses.dbt.harness import DbtHarness

        return DbtHarness
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
