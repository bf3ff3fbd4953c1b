"""The `patchit_heal` DAG: healing scheduled by the user's own Airflow executors.

Add one file to the dags folder:

    from patchit.integrations.airflow_heal import dag  # noqa: F401

or build it with options in that file:

    from patchit.integrations.airflow_heal import make_heal_dag
    dag = make_heal_dag(max_active_runs=2, pool="patchit")

and set `[airflow] heal = "dag"` (or `PATCHIT_AIRFLOW_HEAL=dag`) where the failure callback
runs: the callback then triggers one run of this DAG per failed task, with the event as the
run's conf. The run's one task heals it as `patchit worker --once` would
(`patchit.integrations.heal_task`), on whatever executor runs it, with the deployment's
patchit state (`PATCHIT_HOME` on the workers, or `home=`).

A storm of failures queues runs instead of starting them: `max_active_runs` (default 1) heals
at a time, and `pool` can bound heals across DAGs; duplicates of one cause are one incident in
the memory. The DAG is unpaused at creation (a paused one would hold every heal), runs only
when triggered, never retries (a retry would heal the same event twice), and carries the tag
`patchit-heal`, by which the callback refuses to hand over the DAG's own failures.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from patchit.integrations.airflow_trigger import DEFAULT_HEAL_DAG_ID, HEAL_TAG

_log = logging.getLogger("patchit.heal")
DEFAULT_POOL = "default_pool"  # Airflow's own
DOC = """Heals a failed task that patchit's failure callback handed over (`[airflow] heal =
"dag"`): the run's conf holds the failure event; the heal's outcome is in `patchit incidents`
and the task log. Shipped by patchit (`patchit.integrations.airflow_heal`)."""


def _heal(home: str | os.PathLike[str] | None) -> dict[str, Any]:
    """The task's body: the run's conf to the worker's healing code (imported here, so that
    parsing the DAG file does not load patchit's loop)."""
    from patchit.integrations.heal_task import heal_conf

    dag_run = get_current_context()["dag_run"]
    return heal_conf(getattr(dag_run, "conf", None) or {}, home, say=_log.info)


def make_heal_dag(
    dag_id: str = DEFAULT_HEAL_DAG_ID,
    home: str | os.PathLike[str] | None = None,
    max_active_runs: int = 1,
    pool: str | None = None,
    execution_timeout: timedelta = timedelta(hours=2),
) -> DAG:
    """The heal DAG. Give the callback the same `heal_dag_id` (or `[airflow] heal_dag_id`)
    when `dag_id` is not the default; `pool` must exist in Airflow (Admin > Pools)."""
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2024, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=max_active_runs,
        max_active_tasks=max_active_runs,
        is_paused_upon_creation=False,
        tags=[HEAL_TAG],
        doc_md=DOC,
        default_args={"retries": 0},
    ) as heal_dag:

        @task(task_id="heal", retries=0, execution_timeout=execution_timeout,
              pool=pool or DEFAULT_POOL)  # fmt: skip
        def heal() -> dict[str, Any]:
            return _heal(home)

        heal()
    return heal_dag


def __getattr__(name: str) -> Any:
    """`dag`, the default heal DAG (`patchit_heal`) for the one-line file in the dags folder,
    built on first use (PEP 562): Airflow registers every DAG built while it parses a file, so
    one built at import would stand beside (or for) the one a file builds with
    `make_heal_dag(...)`."""
    if name == "dag":
        built = globals()["dag"] = make_heal_dag()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
