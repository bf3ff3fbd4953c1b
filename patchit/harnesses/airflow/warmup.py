"""The warm Airflow parent's warm-up run: a built-in DAG run once in the parent itself, against
its own copy of the template metadata DB, before the first fork.

What Airflow builds on its first run and keeps for the process, none of it a candidate's, is
then inherited by every child instead of built again in each: SQLAlchemy's compiled statements
(kept with the dialect they were compiled for, which every child's new engine adopts),
the execution API's first requests, lazy imports and caches. The warm-up DAG's own module is
dropped from `sys.modules` after; no user module is ever imported by the parent.

After the run the parent is back as before it: its settings point at its unused DB again, no
connection is left open, and the execution API's loop thread has stopped (a fork must not
inherit a live thread).
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import sys
import threading
import time
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

WARM_DAG_ID = "patchit_warm_up"
WARM_DAG = f'''"""patchit's warm-up DAG: two Python tasks passing an XCom."""
from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def produce(**context):
    return {{"rows": 2}}


def consume(ti, **context):
    return ti.xcom_pull(task_ids="produce")["rows"]


with DAG(dag_id="{WARM_DAG_ID}", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="produce", python_callable=produce) >> PythonOperator(
        task_id="consume", python_callable=consume
    )
'''
THREAD_JOIN_S = 15.0
# The warm parent's environment names the template DB its warm-up runs on (a copy of it).
WARM_DB_ENV = "PATCHIT_AIRFLOW_WARM_DB"


class _Warm:
    dialect: Any = None
    compiled_cache: Any = None


WARM = _Warm()


def warm_up(home: Path, db: Path) -> dict[str, Any]:
    """Run the warm-up DAG in this process (the parent) on `db` (a copy of the template
    metadata DB, removed after) and keep what a child can adopt; its result for the log."""
    from airflow import settings

    from patchit.harnesses.airflow.runner import run_request

    dags = home / "warm-up-dags"
    dags.mkdir(parents=True, exist_ok=True)
    dag_file = dags / f"{WARM_DAG_ID}.py"
    dag_file.write_text(WARM_DAG, encoding="utf-8")
    saved = {k: os.environ.get(k) for k in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
                                            "AIRFLOW__CORE__DAGS_FOLDER")}  # fmt: skip
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{db}"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    modules = set(sys.modules)
    started = time.monotonic()
    result: dict[str, Any] = {}
    shut_down = False
    try:
        _repoint(settings)
        result = run_request({
            "dag_file": str(dag_file), "dags_folder": str(dags), "dag_id": WARM_DAG_ID,
            "task_id": "consume", "map_index": None,
            "logical_date": datetime(2024, 1, 1, tzinfo=UTC).isoformat(),
        })  # fmt: skip
        if result.get("passed") and settings.engine is not None:
            WARM.dialect = settings.engine.dialect
            WARM.compiled_cache = settings.engine._compiled_cache
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _repoint(settings)
        for name in set(sys.modules) - modules:
            if _defined_in(sys.modules.get(name), dags):
                del sys.modules[name]
        # Its cached in-process execution API holds a transport bound to a loop thread: a
        # child must build its own. Shut down now, not whenever the collector gets to it.
        shut_down = close_in_process_api()
        gc.collect()
        _join_threads()
        shutil.rmtree(dags, ignore_errors=True)
        db.unlink(missing_ok=True)
    return {"passed": bool(result.get("passed")), "error": result.get("error") or
            result.get("import_error"), "warm_up_s": round(time.monotonic() - started, 3),
            "threads": threading.active_count(), "api_shut_down": shut_down}  # fmt: skip


def close_in_process_api() -> bool:
    """Shut the warm-up's in-process execution API down as collecting its transport would (its
    lifespan exits, its loop and thread stop: the finalizer Airflow registered on the
    transport) and drop it. Left to the collector, that happened in the parent or not
    depending on its timing; one not collected before its loop is stopped is inherited by
    every child, whose collector would then run that finalizer against the stopped loop
    (which waits 5 s for it). True if it shut one down."""
    from airflow.api_fastapi.execution_api import app
    from airflow.sdk.execution_time import supervisor

    supervisor.in_process_api_server.cache_clear()
    shutdown = getattr(app, "_shutdown_loop", None)
    shut_down = False
    for finalizer in list(getattr(weakref.finalize, "_registry", {})):
        peeked = finalizer.peek()
        if shutdown is not None and peeked is not None and peeked[1] is shutdown:
            finalizer()
            shut_down = True
    return shut_down


def adopt(engine: Any) -> bool:
    """In a child: let `engine` (its own, on the candidate's DB) use the statements the
    warm-up compiled. True if there were some."""
    if WARM.dialect is None or engine is None or type(engine.dialect) is not type(WARM.dialect):
        return False
    engine.dialect = WARM.dialect
    engine._compiled_cache = WARM.compiled_cache
    return True


def _repoint(settings: Any) -> None:
    settings.dispose_orm(do_log=False)
    settings.configure_vars()
    settings.configure_orm()


def _defined_in(module: Any, folder: Path) -> bool:
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and folder.resolve() in Path(path).resolve().parents


def _join_threads() -> None:
    """Stop the execution API's event loops still running (something of Airflow's keeps its
    transport alive) and wait for every other thread to end."""
    deadline = time.monotonic() + THREAD_JOIN_S
    for thread in threading.enumerate():
        if thread is threading.main_thread():
            continue
        loop = getattr(getattr(thread, "_target", None), "__self__", None)
        if isinstance(loop, asyncio.AbstractEventLoop):
            loop.call_soon_threadsafe(loop.stop)
        thread.join(max(deadline - time.monotonic(), 0.0))
