"""The warm Airflow parent's preload (`patchit.harnesses.airflow.fork.preload`'s parts), in a
child process: what it builds once for every fork, and that none of it is a candidate's or
touches a DB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.harnesses.airflow.fork import RUN_MODULES
from patchit.harnesses.airflow.warmup import WARM_DB_ENV

pytestmark = pytest.mark.slow

PROBE = """
import importlib, json, sys
from patchit.harnesses.airflow.fork import RUN_MODULES, warm_orm

before = set(sys.modules)
warm_orm()
failed = []
for name in RUN_MODULES:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        failed.append(f"{name}: {exc}")

from airflow import settings
from airflow._shared.observability.metrics import stats
from sqlalchemy.orm import clear_mappers
from airflow.models.base import Base

print(json.dumps({
    "new_mappers": bool(Base.registry._new_mappers),
    "mapped": len(Base.registry.mappers),
    "metrics_registry": stats._registry is not None,
    "connections": settings.engine.pool.checkedin() + settings.engine.pool.checkedout(),
    "failed": failed,
}))
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], Path]:
    home = tmp_path_factory.mktemp("airflow-parent-home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'unused.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=home, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), home


def test_the_parent_configures_the_mappers_once_for_every_fork(
    probed: tuple[dict[str, object], Path],
) -> None:
    data, _ = probed
    assert data["new_mappers"] is False  # configured: no child pays SQLAlchemy's mapper setup
    assert int(str(data["mapped"])) > 20  # with every Airflow model imported first
    assert data["metrics_registry"] is True  # the metrics YAML parsed once, not per child


def test_the_warm_up_opens_no_metadata_db(probed: tuple[dict[str, object], Path]) -> None:
    data, home = probed
    assert data["connections"] == 0
    assert not (home / "unused.db").exists()


def test_every_preloaded_module_imports(probed: tuple[dict[str, object], Path]) -> None:
    data, _ = probed
    assert data["failed"] == []  # a typo would be skipped silently by the parent


def test_no_preloaded_module_is_a_candidates() -> None:
    """Only Airflow's, its libraries' and patchit's own: a user's module in the parent would
    be served stale to every candidate."""
    roots = {name.split(".")[0] for name in RUN_MODULES}
    assert roots <= {"airflow", "a2wsgi", "anyio", "encodings", "jinja2", "patchit"}


def test_a_failed_warm_up_restarts_the_parent_cold(tmp_path: Path) -> None:
    """A warm-up that cannot run (here: its DB copy is missing) leaves no half-warmed parent:
    it starts over without one and still says it is ready, on the protocol's stdout."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'unused.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        WARM_DB_ENV: str(tmp_path / "missing.db"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "patchit.harnesses.airflow.fork"], env=env, cwd=tmp_path,
        input="", capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    ready = json.loads(proc.stdout.splitlines()[0])
    assert ready["ready"] is True and ready["warm"] is None
    assert "warm-up failed" in proc.stderr and "restarting cold" in proc.stderr


# Two in-process execution APIs one after the other on the parent's one app, the first one
# shut down in between the way collecting its transport does it (the warm-up's, in the
# parent), with no `api_auth/jwt_secret` anywhere: like the parent, nothing here wrote an
# airflow.cfg, which only `python -m airflow` does.
LIFESPAN_PROBE = """
import json, weakref
from patchit.harnesses.airflow.fork import preload

preload()
from airflow.api_fastapi.execution_api.app import InProcessExecutionAPI
from airflow.configuration import conf

runs = []
for _ in range(3):
    try:
        transport = InProcessExecutionAPI().transport
    except ValueError as exc:
        runs.append(str(exc))
        break
    runs.append("ok")
    for done in list(weakref.finalize._registry):  # what collecting the transport runs
        if (done.peek() or (None,))[0] is transport:
            done()
print(json.dumps({"jwt_secret": conf.get("api_auth", "jwt_secret", fallback=None),
                  "runs": runs}))
"""


def test_a_task_after_an_earlier_ones_api_shut_down_needs_no_jwt_secret(tmp_path: Path) -> None:
    """The regression behind the reverted landing: the app is built once, but each
    in-process API's lifespan must run on its own registry (with Airflow's stand-in JWT
    validator), not on one an earlier API's shutdown has emptied; else the lifespan builds
    a real validator and dies on the unset `api_auth/jwt_secret`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env |= {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW_CONFIG": str(tmp_path / "airflow.cfg"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'unused.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    proc = subprocess.run(
        [sys.executable, "-c", LIFESPAN_PROBE], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["jwt_secret"] == ""  # as in the parent: the test would prove nothing else
    assert data["runs"] == ["ok", "ok", "ok"], data["runs"]
