"""patchit.harnesses.airflow: the Airflow harnesses, local and in docker compose.

`harness` is the local harness (`AirflowHarness`): a DAG import check, then the failed tasks in
one run with an isolated AIRFLOW_HOME (`home`); `runner` is the side that runs inside a process
with Airflow imported, `fork` the warm parent that forks one child per candidate and `warmup`
its first run. `compose` runs the same inside the user's docker-compose stack, from the plan
`compose_plan` builds without an engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchit.harnesses.airflow.harness import AirflowHarness

__all__ = ["AirflowHarness"]


def __getattr__(name: str) -> Any:
    # `patchit.harnesses.airflow:AirflowHarness` was the harness's path before this package,
    # and an entry point or a plugin may still name it; imported on first use, so that a
    # module of this package (the warm parent's process) does not load the harness with it
    if name == "AirflowHarness":
        from patchit.harnesses.airflow.harness import AirflowHarness

        return AirflowHarness
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
