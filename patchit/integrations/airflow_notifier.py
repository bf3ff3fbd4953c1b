"""`PatchitNotifier` under its first import path, kept for DAG files that use it.

    from patchit.integrations.airflow import PatchitNotifier   # the contract's path

    @dag(default_args={"on_failure_callback": [PatchitNotifier()]})

Both paths give the same class (`patchit.integrations.notifier_class` builds it).
"""

from __future__ import annotations

from patchit.integrations.airflow import PatchitNotifier

__all__ = ["PatchitNotifier"]
