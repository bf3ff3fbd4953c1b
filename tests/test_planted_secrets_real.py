"""The planted-secret suite end to end: real Airflow and real dbt, as users run them.

A DAG whose Python task fails with secrets in its exception (read from the task's
environment) and whose BashOperator renders `PGPASSWORD=` and an `X-Api-Key` header from
Airflow Variables, under `airflow dags test` with patchit's callback; then `patchit worker
--once`. A dbt model that renders a `--vars` secret and an environment secret into its SQL,
with a password in the profile, through `patchit dbt -- build`. The model tier is on, pointed
at a local server speaking its API. Afterwards no store holds any planted secret.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from patchit.patching.llm.answers import CLASSIFY_TOOL
from patchit.patching.llm.server import ReplayServer
from tests.conftest import commit_all, git
from tests.integrations.test_airflow_real import AIRFLOW, airflow_env
from tests.integrations.test_airflow_real import migrated_airflow_home as migrated_airflow_home
from tests.test_loop_llm import BROKEN, GOOD, MODEL, RIGHT, candidates
from tests.test_planted_secrets import store_texts

pytestmark = pytest.mark.slow

DAG_FILE = "dags/secrets_daily.py"

SECRETS = {
    "exception: password=": "msgpw-real-51c2",
    "exception: GitHub token": "ghp_" + "R8e2" * 9,
    "exception: AWS key": "AKIA" + "Z3X5C7V9B2N4M6Q8",
    "exception: URL password": "urlpw-real-77a0",
    "rendered field: PGPASSWORD": "pgpw-real-3e19",
    "rendered field: X-Api-Key": "hdrkey-real-9d04",
    "log line": "logpw-real-21f6",
    "environment (Airflow)": "envtok-real-c4a8",
    "environment (dbt)": "envpw-real-0b7e",
    "dbt --vars": "varstok-real-6f31",
    "dbt profile": "profpw-real-8a52",
}

DAG = textwrap.dedent(
    """
    import os
    from datetime import datetime

    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import dag, task

    from patchit.integrations.airflow import on_failure_callback


    @dag(
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        default_args={"on_failure_callback": on_failure_callback, "retries": 0},
    )
    def secrets_daily():
        @task
        def load():
            env = os.environ
            print("ERROR connecting with password=" + env["PLANTED_LOG_PW"])
            rows = [{"amount": 3}]
            if "amout" not in rows[0]:
                raise RuntimeError(
                    "rows from https://etl:" + env["PLANTED_URL_PW"] + "@api.shop.test/rows"
                    + " failed, password=" + env["PLANTED_MSG_PW"] + " token " + env["PLANTED_GH"]
                    + " key " + env["PLANTED_AWS"] + " header " + env["SHOP_API_TOKEN"]
                )
            return rows

        load()
        BashOperator(
            task_id="export",
            bash_command=(
                "PGPASSWORD={{ var.value.pg_password }} echo export && "
                'echo "X-Api-Key: {{ var.value.export_api_key }}" >/dev/null && exit 1'
            ),
        )


    secrets_daily()
    """
)


def model(body: dict[str, Any]) -> dict[str, Any]:
    """The model: code_bug when asked for a class, else the fix of whichever unit it is shown."""
    if body.get("tool_choice", {}).get("name") == CLASSIFY_TOOL:
        answer = {"class": "code_bug", "reason": "a typo", "evidence_quotes": []}
        return {"tool_use": {"input": answer}}
    if "customers" in json.dumps(body):
        return candidates(RIGHT)
    search = '"amout" not in rows[0]'
    return candidates(search.replace("amout", "amount"), search=search, path=DAG_FILE)


def test_no_store_holds_a_planted_secret_after_real_heals(
    migrated_airflow_home: Path, shop_repo: Path, tmp_path: Path, _patchit_home: Path
) -> None:
    dags_repo = tmp_path / "pipelines"
    (dags_repo / "dags").mkdir(parents=True)
    (dags_repo / DAG_FILE).write_text(DAG)
    git(dags_repo, "init", "-q", "-b", "main")
    commit_all(dags_repo, "secrets_daily DAG")

    with ReplayServer([model] * 20) as server:
        llm = {"ANTHROPIC_API_KEY": "test-key-not-secret", "ANTHROPIC_BASE_URL": server.base_url}

        # Airflow: the task fails under the real scheduler code, the callback spools
        env = airflow_env(migrated_airflow_home, dags_repo / "dags", _patchit_home)
        env.update(
            AIRFLOW_VAR_PG_PASSWORD=SECRETS["rendered field: PGPASSWORD"],
            AIRFLOW_VAR_EXPORT_API_KEY=SECRETS["rendered field: X-Api-Key"],
            PLANTED_LOG_PW=SECRETS["log line"],
            PLANTED_MSG_PW=SECRETS["exception: password="],
            PLANTED_URL_PW=SECRETS["exception: URL password"],
            PLANTED_GH=SECRETS["exception: GitHub token"],
            PLANTED_AWS=SECRETS["exception: AWS key"],
            SHOP_API_TOKEN=SECRETS["environment (Airflow)"],
        )
        run = subprocess.run(
            [AIRFLOW, "dags", "test", "secrets_daily", "2026-11-25"],
            env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert "RuntimeError" in run.stdout + run.stderr, run.stdout[-3000:]
        cli = [sys.executable, "-m", "patchit"]
        worker = subprocess.run(
            [*cli, "worker", "--once"], env={**os.environ, **llm},
            capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert worker.returncode == 0, worker.stderr[-3000:]

        # dbt: the wrapper, with secrets in --vars, in the environment and in the profile
        customers = shop_repo / MODEL
        customers.write_text(
            customers.read_text()
            .replace(GOOD, BROKEN)
            .replace(
                "select\n",
                "select\n    '{{ var(\"api_token\") }}' as token_used,\n"
                "    '{{ env_var(\"SHOP_DB_PASSWORD\") }}' as password_used,\n",
                1,
            )
        )
        commit_all(shop_repo, "customers: keep the last order status")
        profiles = shop_repo / "profiles.yml"
        profiles.write_text(
            profiles.read_text()
            + "    prod:\n      type: postgres\n      host: db\n      user: etl\n"
            + f"      password: {SECRETS['dbt profile']}\n      port: 5432\n"
            + "      dbname: shop\n      schema: main\n"
        )
        dbt = subprocess.run(
            [*cli, "dbt", "--project-dir", str(shop_repo), "--", "build", "--profiles-dir",
             str(shop_repo), "--vars", json.dumps({"api_token": SECRETS["dbt --vars"]})],
            cwd=shop_repo, capture_output=True, text=True, timeout=1800,
            env={**os.environ, **llm, "SHOP_DB_PASSWORD": SECRETS["environment (dbt)"]},
        )  # fmt: skip
        assert dbt.returncode == 1, dbt.stdout[-3000:] + dbt.stderr[-3000:]
        requests = list(server.requests)

    listed = subprocess.run([*cli, "incidents", "--json"], capture_output=True, text=True)
    incidents = json.loads(listed.stdout)
    shown = [(i["status"], i["summary"][:200], i["report_md"]) for i in incidents]
    assert len(incidents) >= 2 and any(i["report_md"] for i in incidents), shown
    assert requests, "the model was never asked: the request bodies went unchecked"
    texts = store_texts(_patchit_home, [dags_repo, shop_repo], requests)
    found = [(label, store) for store, text in texts.items()
             for label, secret in SECRETS.items() if secret in text]  # fmt: skip
    assert found == []
    # the inputs did carry them: the rendered command and the --vars reached patchit, masked
    assert "PGPASSWORD=***REDACTED***" in texts["spool.sqlite3 rows"]
    assert "api_token" in texts["attempts.sqlite3 rows"]
