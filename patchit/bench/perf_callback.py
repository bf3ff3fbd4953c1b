"""The child process of the callback benchmark: `python -m patchit.bench.perf_callback`.

It stands in for an Airflow task process at the moment its task failed: `airflow.sdk` and a
real DAG, PythonOperator, LocalDagBundle and RuntimeTaskInstance are loaded first; then it
times importing `patchit.integrations.airflow` and `calls` calls of `on_failure_callback`
with a KeyError raised a few frames deep, spooling into $PATCHIT_HOME. The innermost frames
run code compiled as the DAG file's (a CSV row and a JSON payload among their locals), so
each call also records the failing frame's locals, as it does for a real task. It prints one JSON
object: {"sdk_import_ms", "import_ms", "new_modules", "samples_ms"}.

Top-level imports are standard library only, so nothing of patchit is loaded before the
import being timed.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

SETTINGS = {"currency": "EUR", "columns": ["region", "orders"]}
# The task's own code, compiled as a function of the DAG file (its frames are the repo's).
TASK_SOURCE = """\
import csv, io, json

HEADER = "invoice_id,customer,country,net_cents,tax_cents,currency,issued_on\\n"
ROWS = HEADER + "9001,acme,DE,9900,1881,EUR,2026-01-15\\n" * 50


def total_cents(depth):
    if depth > 0:
        return total_cents(depth - 1)
    payload = json.loads('{"batch": {"id": 7, "rows": 50}, "source": "landing"}')
    total = 0
    for row in csv.DictReader(io.StringIO(ROWS)):
        total += int(row["amount_cents"])
    return total
"""


def _report_currency(depth: int) -> str:
    if depth > 0:
        return _report_currency(depth - 1)
    return str(SETTINGS["curency"])


def failing_exception(dag_file: str | None = None) -> BaseException:
    """A KeyError with a traceback of several frames, as a task's user code raises it (in the
    DAG file's own code when `dag_file` is given)."""
    namespace: dict[str, Any] = {}
    if dag_file is not None:
        exec(compile(TASK_SOURCE, dag_file, "exec", dont_inherit=True), namespace)
    try:
        if dag_file is not None:
            namespace["total_cents"](6)
        else:
            _report_currency(6)
    except KeyError as exc:
        return exc
    raise AssertionError("the lookup did not fail")


def failure_context(dag_file: str, dags_folder: str) -> dict[str, Any]:
    """The context Airflow hands a failure callback, built from Airflow's own classes."""
    from airflow.dag_processing.bundles.local import LocalDagBundle
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    with DAG(dag_id="orders_daily", schedule="@daily", start_date=datetime(2026, 1, 1)) as dag:
        task = PythonOperator(task_id="write_report", python_callable=_report_currency)
    dag.fileloc = dag_file
    run_id = "scheduled__2026-11-25T00:00:00+00:00"
    # model_construct: the task runner receives these fields from the API server, validated.
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(), task_id=task.task_id, dag_id=dag.dag_id, run_id=run_id,
        try_number=1, dag_version_id=uuid.uuid4(), map_index=-1, hostname="worker-1",
        task=task, bundle_instance=LocalDagBundle(name="dags-folder", path=dags_folder),
        max_tries=1, start_date=datetime.now(UTC),
    )  # fmt: skip
    return {
        "ti": ti,
        "task_instance": ti,
        "dag": dag,
        "task": task,
        "run_id": run_id,
        "logical_date": datetime(2026, 11, 25, tzinfo=UTC),
        "ds": "2026-11-25",
        "exception": failing_exception(dag_file),
    }


def time_calls(context: Mapping[str, Any], calls: int) -> dict[str, Any]:
    before = set(sys.modules)
    started = time.perf_counter()
    from patchit.integrations.airflow import on_failure_callback

    import_ms = (time.perf_counter() - started) * 1000
    new_modules = sorted(set(sys.modules) - before)
    samples_ms: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        on_failure_callback(context)
        samples_ms.append(round((time.perf_counter() - started) * 1000, 3))
    return {"import_ms": round(import_ms, 3), "new_modules": new_modules, "samples_ms": samples_ms}


def main(argv: list[str]) -> None:
    calls, dag_file, dags_folder = int(argv[0]), argv[1], argv[2]
    started = time.perf_counter()
    import airflow.sdk  # noqa: F401

    sdk_import_ms = (time.perf_counter() - started) * 1000
    result = time_calls(failure_context(dag_file, dags_folder), calls)
    print(json.dumps({"sdk_import_ms": round(sdk_import_ms, 3), **result}))


if __name__ == "__main__":
    main(sys.argv[1:])
