"""The class behind `patchit.integrations.airflow.PatchitNotifier`, built from the callback.

`PatchitNotifier` must be importable from `patchit.integrations.airflow` (CONTRACT.md), but that
module is standard library only (it runs in every failing task) while a notifier subclasses
Airflow's `BaseNotifier`. So the class is built on first use by `airflow.__getattr__` (PEP 562)
with this factory, given the callback maker; this module imports Airflow and nothing of patchit,
so the imports still flow one way (`airflow_notifier` is an alias of the contract path).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier

CallbackMaker = Callable[..., Callable[[Mapping[str, Any]], None]]


def build_notifier_class(make_callback: CallbackMaker, module: str) -> type[BaseNotifier]:
    """`PatchitNotifier`, calling what `make_callback` returns, named as living in `module`
    (so pickling and Airflow's import-path lookups find it where users import it)."""

    class PatchitNotifier(BaseNotifier):
        """The failure callback the Airflow 3 way:
        `@dag(default_args={"on_failure_callback": [PatchitNotifier()]})`. It hands the failure
        over exactly as `on_failure_callback` does: spooled, or with `heal="dag"` (or
        `[airflow] heal = "dag"`) a run of the `patchit_heal` DAG triggered through the REST API;
        the same options; never raises into Airflow."""

        template_fields = ()

        def __init__(
            self,
            home: str | os.PathLike[str] | None = None,
            repos: Mapping[str, str] | None = None,
            extra: Mapping[str, Any] | None = None,
            capture_locals: bool = True,
            heal: str | None = None,
            api_url: str | None = None,
            heal_dag_id: str | None = None,
            trigger_timeout_s: float | None = None,
        ) -> None:
            super().__init__()
            self._callback = make_callback(
                home, repos, extra, capture_locals, heal, api_url, heal_dag_id, trigger_timeout_s
            )

        def notify(self, context: Mapping[str, Any]) -> None:
            self._callback(context)

    PatchitNotifier.__module__ = module
    PatchitNotifier.__qualname__ = "PatchitNotifier"
    return PatchitNotifier
