"""`PatchitNotifier`: the failure callback the Airflow 3 way.

    from patchit.integrations.airflow_notifier import PatchitNotifier

    @dag(default_args={"on_failure_callback": [PatchitNotifier()]})

It hands the failure over exactly as `patchit.integrations.airflow.on_failure_callback` does (the
plain function stays): spooled, or with `heal="dag"` (or `[airflow] heal = "dag"`) a run of
the `patchit_heal` DAG triggered through the REST API; the same options; never raises into
Airflow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier

from patchit.integrations.airflow import make_failure_callback


class PatchitNotifier(BaseNotifier):
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
        self._callback = make_failure_callback(
            home, repos, extra, capture_locals, heal, api_url, heal_dag_id, trigger_timeout_s
        )

    def notify(self, context: Mapping[str, Any]) -> None:
        self._callback(context)
