"""`[airflow] heal = "dag"` without Airflow: the callback's trigger request against a local
HTTP server, the fallback to the spool, the recursion guard, and where the settings come from."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from patchit.config import AirflowConfig, PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.integrations import airflow_trigger as trig
from patchit.integrations.airflow import make_failure_callback
from tests.fake_airflow import LOGIN_TOKEN, FakeAirflow, serve
from tests.integrations.test_airflow_callback import FakeDag, FakeTI, dag_repo, spooled

__all__ = ["dag_repo"]  # the fixture, used here

TOKEN = "eyJhbGciOiJIUzUxMiJ9.secret-airflow-api-token"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        trig.HEAL_ENV, trig.API_URL_ENV, trig.TOKEN_ENV, trig.EXECUTION_API_ENV,
        trig.USERNAME_ENV, trig.PASSWORD_ENV,
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def context(
    repo: Path, dag_id: str = "orders_daily", tags: Any = (), error: BaseException | None = None
) -> dict[str, Any]:
    ti = FakeTI()
    ti.dag_id = dag_id
    dag = FakeDag(repo / "dags" / "orders.py")
    dag.dag_id = dag_id
    dag.tags = tags  # type: ignore[attr-defined]
    return {"ti": ti, "dag": dag, "exception": error or KeyError("amout")}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_callback_triggers_the_heal_dag_with_the_event_as_conf(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(trig.TOKEN_ENV, TOKEN)
    error = KeyError(f"amout (sent with Authorization: Bearer {TOKEN})")
    with serve(FakeAirflow()) as airflow:
        make_failure_callback(heal="dag", api_url=airflow.url + "/")(context(dag_repo, error=error))
    [seen] = airflow.requests
    assert (seen.method, seen.path) == ("POST", "/api/v2/dags/patchit_heal/dagRuns")
    assert seen.headers["Authorization"] == f"Bearer {TOKEN}"
    assert seen.headers["Content-Type"] == "application/json"
    body = seen.body
    assert set(body) == {"dag_run_id", "logical_date", "conf", "note"}
    assert body["logical_date"] is None
    event = UniversalFailureEvent.model_validate(body["conf"]["event"])
    assert (event.pipeline_id, event.unit_id, event.error_type) == (
        "orders_daily", "load_orders", "KeyError",
    )  # fmt: skip
    assert event.repo_path == str(dag_repo)
    assert body["dag_run_id"] == f"patchit__orders_daily.load_orders__{event.event_id}"
    assert re.fullmatch(r"[A-Za-z0-9_.~:+-]+", body["dag_run_id"])
    assert "Bearer ***REDACTED***" in event.error_message  # the event had it, redacted
    assert TOKEN not in str(body)  # before it leaves the process
    assert not (_patchit_home / "spool").exists()  # handed over: nothing spooled


def test_the_heal_mode_comes_from_the_repository_config_and_the_env_overrides_it(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve(FakeAirflow()) as airflow:  # the repository's api_url: the task's own server
        monkeypatch.setenv(trig.EXECUTION_API_ENV, f"{airflow.url}/execution/")
        (dag_repo / ".patchit.toml").write_text(
            f'[airflow]\nheal = "dag"\napi_url = "{airflow.url}"\nheal_dag_id = "heal_here"\n'
        )
        make_failure_callback()(context(dag_repo))
        assert [r.path for r in airflow.requests] == ["/api/v2/dags/heal_here/dagRuns"]
        monkeypatch.setenv(trig.HEAL_ENV, "spool")
        make_failure_callback()(context(dag_repo))
    assert len(airflow.requests) == 1
    assert len(spooled(_patchit_home)) == 1


def test_the_api_url_defaults_to_the_server_that_runs_the_task(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(trig.HEAL_ENV, "dag")
    with serve(FakeAirflow()) as airflow:
        monkeypatch.setenv(trig.EXECUTION_API_ENV, f"{airflow.url}/execution/")
        make_failure_callback()(context(dag_repo))
    assert [r.path for r in airflow.requests] == ["/api/v2/dags/patchit_heal/dagRuns"]


@pytest.mark.parametrize("status", [500, 404, 401, 403])
def test_a_refusal_or_a_server_error_spools_instead(
    status: int, dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(FakeAirflow(status=status)) as airflow:
        make_failure_callback(heal="dag", api_url=airflow.url)(context(dag_repo))
    assert len(airflow.requests) == 1
    [event] = spooled(_patchit_home)
    assert event["unit_id"] == "load_orders"
    [line] = [r.getMessage() for r in caplog.records if "could not trigger" in r.getMessage()]
    assert f"answered HTTP {status} (refused with {status})" in line
    assert f"spooling the failure in {_patchit_home}" in line


def test_a_refused_connection_spools_instead(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    make_failure_callback(heal="dag", api_url=url)(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "unreachable ([Errno 111] Connection refused)" in caplog.text


def test_a_server_that_does_not_answer_in_time_spools_instead(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(FakeAirflow(delay_s=2.0)) as airflow:
        started = time.monotonic()
        callback = make_failure_callback(heal="dag", api_url=airflow.url, trigger_timeout_s=0.3)
        callback(context(dag_repo))
        took = time.monotonic() - started
    assert took < 1.5, took
    assert len(spooled(_patchit_home)) == 1
    assert "timed out" in caplog.text


def test_no_api_url_spools_and_says_where_to_set_one(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_failure_callback(heal="dag")(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "no Airflow API URL: set [airflow] api_url or PATCHIT_AIRFLOW_API_URL" in caplog.text


@pytest.mark.parametrize(
    ("dag_id", "tags"), [("patchit_heal", ()), ("my_heal", ["patchit-heal"]), ("x", None)]
)
@pytest.mark.parametrize("heal", ["dag", "spool"])
def test_a_failure_of_the_heal_dag_is_never_handed_over(
    dag_id: str, tags: Any, heal: str, dag_repo: Path, _patchit_home: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    with serve(FakeAirflow()) as airflow:
        callback = make_failure_callback(heal=heal, api_url=airflow.url, heal_dag_id="x")
        callback(context(dag_repo, dag_id, tags))
    assert airflow.requests == []
    assert not (_patchit_home / "spool").exists()
    assert f"not healing a failure of {dag_id}, patchit's own heal DAG" in caplog.text


def test_bad_settings_are_said_and_the_failure_spooled(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (dag_repo / ".patchit.toml").write_text('[airflow]\nheal = "queue"\n')
    make_failure_callback()(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "heal = 'queue' is not 'spool' or 'dag'; spooling" in caplog.text
    (dag_repo / ".patchit.toml").write_text("[airflow\n")
    make_failure_callback()(context(dag_repo))
    assert len(spooled(_patchit_home)) == 2
    assert "invalid TOML" in caplog.text


def test_settings_precedence() -> None:
    env = {trig.HEAL_ENV: "dag", trig.API_URL_ENV: "http://env:8080"}
    settings = trig.resolve_heal_settings(None, environ=env)
    assert (settings.mode, settings.api_url, settings.dag_id) == (
        "dag", "http://env:8080", "patchit_heal",
    )  # fmt: skip
    assert trig.resolve_heal_settings(None, heal="spool", environ=env).mode == "spool"
    plain = trig.resolve_heal_settings(None, environ={})
    assert (plain.mode, plain.api_url, plain.timeout_s) == ("spool", None, 3.0)
    derived = trig.resolve_heal_settings(
        None, environ={trig.EXECUTION_API_ENV: "http://airflow-apiserver:8080/execution/"}
    )
    assert derived.api_url == "http://airflow-apiserver:8080"


def test_the_config_declares_the_callbacks_keys_with_the_same_defaults() -> None:
    config = AirflowConfig()
    assert (config.heal, config.heal_dag_id, config.trigger_timeout_s) == (
        trig.DEFAULT_HEAL, trig.DEFAULT_HEAL_DAG_ID, trig.DEFAULT_TRIGGER_TIMEOUT_S,
    )  # fmt: skip
    assert PatchitConfig.model_validate({"airflow": {"heal": "dag"}}).airflow.heal == "dag"
    with pytest.raises(ValidationError):
        AirflowConfig.model_validate({"heal": "queue"})


def test_a_failed_trigger_and_a_failed_spool_are_both_said_never_raised(
    dag_repo: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    url = f"http://127.0.0.1:{free_port()}"
    make_failure_callback(home=blocker / "home", heal="dag", api_url=url)(context(dag_repo))
    lines = [r.getMessage() for r in caplog.records]
    assert any("could not trigger patchit_heal" in line for line in lines), lines
    [line] = capsys.readouterr().err.splitlines()  # the spool's own line, on stderr
    assert line.startswith("patchit: could not keep the failure of")
    assert "NotADirectoryError" in line


def test_a_login_gets_a_token_when_none_is_given(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeAirflow()
    monkeypatch.setenv(trig.USERNAME_ENV, "patchit")
    monkeypatch.setenv(trig.PASSWORD_ENV, fake.password)
    error = RuntimeError(f"could not connect with password={fake.password}")
    with serve(fake) as airflow:
        make_failure_callback(heal="dag", api_url=airflow.url)(context(dag_repo, error=error))
    login, trigger = airflow.requests
    assert (login.path, trigger.path) == ("/auth/token", "/api/v2/dags/patchit_heal/dagRuns")
    assert "Authorization" not in login.headers
    assert trigger.headers["Authorization"] == f"Bearer {LOGIN_TOKEN}"
    assert "password=***REDACTED***" in trigger.body["conf"]["event"]["error_message"]
    assert fake.password not in str(trigger.body)


def test_a_refused_login_spools_and_never_logs_the_password(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    monkeypatch.setenv(trig.USERNAME_ENV, "patchit")
    monkeypatch.setenv(trig.PASSWORD_ENV, "wrong-password-here")
    with serve(FakeAirflow()) as airflow:
        make_failure_callback(heal="dag", api_url=airflow.url)(context(dag_repo))
    assert [r.path for r in airflow.requests] == ["/auth/token"]
    assert len(spooled(_patchit_home)) == 1
    assert "/auth/token answered HTTP 401 (Invalid credentials)" in caplog.text
    assert "wrong-password-here" not in caplog.text
